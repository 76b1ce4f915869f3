"""RL maths as pure tensor functions: group advantages, the clipped policy loss, KL and entropy.

Nothing here touches a model, an optimizer or a device beyond the tensors it is given. Importing the
package is cheap: `LossConfig` and its literals come from `posttrain.algo.config` (no torch); the
tensor functions load torch on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from posttrain.algo.config import Aggregation, KLEstimator, LossConfig, RatioLevel

if TYPE_CHECKING:
    from posttrain.algo.advantages import group_advantages, ragged_group_advantages
    from posttrain.algo.kl import entropy_from_logits, kl_k1, kl_k3, kl_penalty, token_logprobs
    from posttrain.algo.losses import (
        Normalizer,
        PolicyLoss,
        aggregate,
        clipped_surrogate,
        log_importance_ratio,
        policy_loss,
    )
    from posttrain.algo.weights import weights_from_coefficients

_LAZY = {
    "group_advantages": "advantages",
    "ragged_group_advantages": "advantages",
    "entropy_from_logits": "kl",
    "kl_k1": "kl",
    "kl_k3": "kl",
    "kl_penalty": "kl",
    "token_logprobs": "kl",
    "Normalizer": "losses",
    "PolicyLoss": "losses",
    "aggregate": "losses",
    "clipped_surrogate": "losses",
    "log_importance_ratio": "losses",
    "policy_loss": "losses",
    "weights_from_coefficients": "weights",
}

__all__ = [
    "Aggregation",
    "KLEstimator",
    "LossConfig",
    "Normalizer",
    "PolicyLoss",
    "RatioLevel",
    "aggregate",
    "clipped_surrogate",
    "entropy_from_logits",
    "group_advantages",
    "kl_k1",
    "kl_k3",
    "kl_penalty",
    "log_importance_ratio",
    "policy_loss",
    "ragged_group_advantages",
    "token_logprobs",
    "weights_from_coefficients",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"posttrain.algo.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'posttrain.algo' has no attribute {name!r}")
