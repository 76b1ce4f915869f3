"""The GRPO-family clipped policy loss, with its KL and entropy terms and aggregation modes.

Per token t of response i, with ratio r and advantage A_i (one per response):
`l = -min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A)` (PPO, Schulman et al. 2017, eq. 7), where
an asymmetric `clip_high > clip_low` is DAPO's clip-higher (Yu et al. 2025, sec. 3.1). The ratio is the
token ratio `pi/pi_old` (GRPO, DAPO) or GSPO's sequence ratio `exp(mean_t log(pi/pi_old))`
(Zheng et al. 2025, eq. 7) shared by every token of the response. Token terms are reduced by
- `token_mean`: sum over all tokens / number of tokens (DAPO, sec. 3.3);
- `seq_mean_token_mean`: mean over each response, then over responses (GRPO);
- `seq_mean_token_sum_norm`: sum over each response / a constant length, then mean (Dr. GRPO, sec. 3.1).

Guarantees: every reduction divides by counts held in a `Normalizer`, so when a batch is split into
micro-batches that share the whole batch's normaliser, the micro-batch losses (and their gradients)
sum exactly to the whole-batch loss. Masked positions never produce NaN whatever they hold.
Not here: advantages (`posttrain.algo.advantages`) and computing log-probabilities from a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from posttrain.algo.config import Aggregation, LossConfig, RatioLevel
from posttrain.algo.kl import kl_k3, kl_penalty

MAX_LOG_RATIO = 20.0
"""Log-ratios are clamped to +-this before exp so one diverged token cannot overflow to inf."""

MAX_KL_PER_TOKEN = 10.0
"""Per-token KL estimates are clamped to +-this: k3 grows like exp(log ref - log pi), so one token the
policy has all but ruled out could otherwise outweigh the whole batch (and carry no useful gradient)."""


@dataclass(frozen=True)
class Normalizer:
    """The whole batch's counts that every micro-batch divides by (see the module docstring)."""

    num_seqs: float
    """Number of responses in the batch."""
    num_tokens: float
    """Number of unmasked response tokens in the batch."""
    seq_len_norm: float
    """Constant per-response length divisor for `seq_mean_token_sum_norm`."""

    @classmethod
    def from_mask(cls, mask: Tensor, norm_num_tokens: int | None = None) -> Normalizer:
        """Counts of `mask` `[B, T]`; the Dr. GRPO divisor defaults to the longest response."""
        lengths = mask.float().sum(dim=1)  # [B]
        longest = float(lengths.max().item()) if lengths.numel() else 1.0
        return cls(
            num_seqs=float(max(mask.shape[0], 1)),
            num_tokens=max(float(lengths.sum().item()), 1.0),
            seq_len_norm=float(norm_num_tokens) if norm_num_tokens is not None else max(longest, 1.0),
        )


@dataclass(frozen=True)
class PolicyLoss:
    """The loss to back-propagate and detached diagnostics (all additive across micro-batches)."""

    loss: Tensor
    """Scalar: policy-gradient term + kl_beta * KL - entropy_coef * entropy."""
    pg_loss: Tensor
    """Scalar: the clipped surrogate term alone."""
    kl: Tensor
    """Scalar: token-mean KL to the reference (0 without one)."""
    entropy: Tensor
    """Scalar: token-mean entropy (0 when not given)."""
    clip_fraction: Tensor
    """Scalar: fraction of tokens whose clipped branch is active."""
    kl_old: Tensor
    """Scalar: token-mean k3 estimate of KL(pi || pi_old), i.e. how far this update has moved."""
    sample_losses: Tensor
    """`[B]`: each response's token-mean total loss, unweighted (for per-domain reporting)."""


def aggregate(
    values: Tensor,
    mask: Tensor,
    mode: Aggregation,
    normalizer: Normalizer,
    sample_weights: Tensor | None = None,
) -> Tensor:
    """Reduce token terms `[B, T]` to a scalar by `mode`; `sample_weights` `[B]` scale each response."""
    is_token = mask.bool()
    masked = torch.where(is_token, values, torch.zeros_like(values))  # [B, T]
    if sample_weights is not None:
        masked = masked * sample_weights.to(masked.dtype).unsqueeze(1)
    if mode == "token_mean":
        return masked.sum() / normalizer.num_tokens
    if mode == "seq_mean_token_mean":
        lengths = is_token.sum(dim=1).clamp(min=1).to(masked.dtype)  # [B]
        return (masked.sum(dim=1) / lengths).sum() / normalizer.num_seqs
    return masked.sum() / (normalizer.seq_len_norm * normalizer.num_seqs)


def log_importance_ratio(logprobs: Tensor, old_logprobs: Tensor, mask: Tensor, level: RatioLevel) -> Tensor:
    """Log of the importance ratio per token `[B, T]` (GSPO: the response's mean, on every token)."""
    is_token = mask.bool()
    log_ratio = torch.where(is_token, logprobs - old_logprobs, torch.zeros_like(logprobs))  # [B, T]
    if level == "sequence":
        lengths = is_token.sum(dim=1, keepdim=True).clamp(min=1).to(log_ratio.dtype)  # [B, 1]
        log_ratio = (log_ratio.sum(dim=1, keepdim=True) / lengths).expand_as(log_ratio)
    return log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)


def clipped_surrogate(
    log_ratio: Tensor, advantages: Tensor, clip_low: float, clip_high: float
) -> tuple[Tensor, Tensor]:
    """Per-token PPO loss `[B, T]` and whether its clipped branch is active, for `advantages` `[B]`."""
    ratio = torch.exp(log_ratio)  # [B, T]
    adv = advantages.to(ratio.dtype).unsqueeze(1)  # [B, 1]
    unclipped = -ratio * adv
    clipped = -ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv
    is_clipped = clipped > unclipped
    return torch.maximum(unclipped, clipped), is_clipped


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: LossConfig,
    *,
    ref_logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    sample_weights: Tensor | None = None,
    normalizer: Normalizer | None = None,
) -> PolicyLoss:
    """The full loss for response tokens `[B, T]` (`mask` 1 on real tokens) and advantages `[B]`.

    `ref_logprobs` is required when `config.kl_beta > 0`; `entropy` `[B, T]` enters the loss only
    when `config.entropy_coef > 0` (otherwise it is reported). Pass the whole batch's `normalizer`
    when this is one micro-batch of it.
    """
    if config.kl_beta > 0 and ref_logprobs is None:
        raise ValueError("kl_beta > 0 needs ref_logprobs")
    norm = normalizer or Normalizer.from_mask(mask, config.norm_num_tokens)
    mode = config.aggregation
    log_ratio = log_importance_ratio(logprobs, old_logprobs.detach(), mask, config.ratio)
    token_loss, is_clipped = clipped_surrogate(log_ratio, advantages, config.clip_low, config.clip_high)
    pg_loss = aggregate(token_loss, mask, mode, norm, sample_weights)
    loss = pg_loss
    zero = logprobs.new_zeros(())
    kl_mean, entropy_mean = zero, zero
    if ref_logprobs is not None:
        kl = kl_penalty(logprobs, ref_logprobs.detach(), config.kl_estimator)  # [B, T]
        kl = kl.clamp(-MAX_KL_PER_TOKEN, MAX_KL_PER_TOKEN)
        kl_mean = aggregate(kl.detach(), mask, "token_mean", norm)
        if config.kl_beta > 0:
            loss = loss + config.kl_beta * aggregate(kl, mask, mode, norm, sample_weights)
            token_loss = token_loss + config.kl_beta * kl
    if entropy is not None:
        entropy_mean = aggregate(entropy.detach(), mask, "token_mean", norm)
        if config.entropy_coef > 0:
            loss = loss - config.entropy_coef * aggregate(entropy, mask, mode, norm, sample_weights)
            token_loss = token_loss - config.entropy_coef * entropy
    lengths = mask.bool().sum(dim=1).clamp(min=1)  # [B]
    sample_losses = torch.where(mask.bool(), token_loss, torch.zeros_like(token_loss)).sum(1) / lengths
    return PolicyLoss(
        loss=loss,
        pg_loss=pg_loss.detach(),
        kl=kl_mean,
        entropy=entropy_mean,
        clip_fraction=aggregate(is_clipped.float(), mask, "token_mean", norm),
        kl_old=aggregate(kl_k3(logprobs.detach(), old_logprobs.detach()), mask, "token_mean", norm),
        sample_losses=sample_losses.detach(),
    )
