"""The policy loss's hyper-parameters, without torch: training configs import this at no cost.

`posttrain.algo.losses` implements what these fields select. Not here: any tensor code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from posttrain.config import StrictModel

Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
RatioLevel = Literal["token", "sequence"]
KLEstimator = Literal["k1", "k3"]


class LossConfig(StrictModel):
    """Hyper-parameters of the policy loss (defaults: DAPO-style token-mean with clip-higher)."""

    clip_low: float = Field(0.2, ge=0.0, lt=1.0)
    """Lower clip range: the ratio is clipped below at 1 - clip_low."""
    clip_high: float = Field(0.28, ge=0.0)
    """Upper clip range: the ratio is clipped above at 1 + clip_high (DAPO clip-higher when > clip_low)."""
    ratio: RatioLevel = "token"
    """Importance ratio per token (GRPO/DAPO) or per sequence, length-normalised (GSPO)."""
    aggregation: Aggregation = "token_mean"
    """How token terms become one loss: token_mean (DAPO), seq_mean_token_mean (GRPO), seq_mean_token_sum_norm (Dr. GRPO)."""
    norm_num_tokens: int | None = Field(None, gt=0)
    """Dr. GRPO's constant length normaliser in tokens; None uses the longest response of the batch."""
    kl_beta: float = Field(0.0, ge=0.0)
    """Weight of the KL-to-reference penalty; 0 disables it and the reference model."""
    kl_estimator: KLEstimator = "k3"
    """Per-token KL estimator: k1 (log ratio) or k3 (Schulman's non-negative estimator)."""
    entropy_coef: float = Field(0.0, ge=0.0)
    """Weight of the entropy bonus subtracted from the loss; 0 disables it."""
