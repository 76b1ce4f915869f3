"""Per-sample loss coefficients that give each domain a chosen share of the gradient.

With a plain token mean, a domain's share of the gradient is its share of the batch's tokens, so
long-answer domains (code, proofs) silently get more than their sampling weight says. The trainer
multiplies every per-token loss of sample i by `coef[i]` and sums; with

    coef = domain_loss_coefficients(domain_ids, token_counts, weights, mode="domain_token_mean")

the loss is sum_d share_d * (token-mean loss of domain d), so domain d's share is `share_d`.

Two ways to apply curriculum weights; pick one:
  * "sample by weight" (the default): the mixture's `batch_counts` sets how many prompts each domain
    gets; then call this with `weights=None`, which uses the batch's own sample shares n_d / N as the
    domain shares, removing only the token-length bias.
  * "weight the loss": sample domains uniformly (or by any fixed rule) and pass the mixture's weights
    here. Fewer, steadier batches per domain, but rare domains are seen rarely.
Doing both squares the weights (share ~ w^2). `WeightRouting` hands the weights to exactly one side, and
this function refuses `weights` together with `sampled_by_weight=True` unless `allow_double=True`.
Plain floats in and out: no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

LossMode = Literal["token_mean", "sequence_mean", "domain_token_mean", "domain_sequence_mean"]
"""token_mean: every token equal (share ~ tokens). sequence_mean: every sample equal, each sample's
tokens averaged (share ~ samples). domain_token_mean / domain_sequence_mean: domain d gets share_d,
averaged inside the domain per token / per sample."""


class DoubleWeightingError(ValueError):
    """Curriculum weights were about to be applied both in sampling and in the loss."""


def domain_loss_coefficients(
    domain_ids: Sequence[str],
    token_counts: Sequence[int],
    weights: Mapping[str, float] | None = None,
    mode: LossMode = "domain_token_mean",
    *,
    sampled_by_weight: bool = False,
    allow_double: bool = False,
) -> list[float]:
    """Coefficient per sample; the loss is sum_i coef_i * sum_t loss_{i,t} (see the module docstring).

    `weights` are renormalised over the domains present in the batch; a present domain missing from
    `weights` gets share 0. With `weights=None` the shares are the batch's sample shares.
    """
    if len(domain_ids) != len(token_counts):
        raise ValueError("domain_ids and token_counts must have the same length")
    if any(t < 0 for t in token_counts):
        raise ValueError("token counts must be >= 0")
    if weights is not None and sampled_by_weight and not allow_double:
        raise DoubleWeightingError(
            "the batch was sampled by curriculum weight; weighting the loss too would square the weights "
            "(pass weights=None, or allow_double=True if this is intended)"
        )
    num = len(domain_ids)
    if num == 0:
        return []
    if mode == "token_mean":
        total = sum(token_counts)
        return [1.0 / total if total else 0.0 for _ in token_counts]
    if mode == "sequence_mean":
        return [1.0 / (num * t) if t else 0.0 for t in token_counts]
    shares = _domain_shares(domain_ids, weights)
    if mode == "domain_token_mean":
        tokens: Counter[str] = Counter()
        for d, t in zip(domain_ids, token_counts, strict=True):
            tokens[d] += t
        return [shares[d] / tokens[d] if tokens[d] and t else 0.0
                for d, t in zip(domain_ids, token_counts, strict=True)]
    if mode == "domain_sequence_mean":
        samples = Counter(d for d, t in zip(domain_ids, token_counts, strict=True) if t)
        return [shares[d] / (samples[d] * t) if t else 0.0 for d, t in zip(domain_ids, token_counts, strict=True)]
    raise ValueError(f"unknown loss weighting mode {mode!r}")


def _domain_shares(domain_ids: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    present = Counter(domain_ids)
    if weights is None:
        raw = {d: float(c) for d, c in present.items()}
    else:
        raw = {d: max(float(weights.get(d, 0.0)), 0.0) for d in present}
    total = sum(raw.values())
    if total <= 0:
        return {d: 1.0 / len(present) for d in present}
    return {d: w / total for d, w in raw.items()}


@dataclass(frozen=True)
class WeightRouting:
    """Sends curriculum weights to exactly one place: the sampler or the loss."""

    apply_via: Literal["sampling", "loss"] = "sampling"

    def sampling_weights(self, weights: Mapping[str, float]) -> dict[str, float]:
        """Weights for the sampler: the curriculum's, or uniform when the loss applies them."""
        if self.apply_via == "sampling":
            return dict(weights)
        return {d: 1.0 / len(weights) for d in weights}

    def loss_weights(self, weights: Mapping[str, float]) -> dict[str, float] | None:
        """Weights for `domain_loss_coefficients`: None (batch shares) when sampling applies them."""
        return dict(weights) if self.apply_via == "loss" else None

    @property
    def sampled_by_weight(self) -> bool:
        return self.apply_via == "sampling"
