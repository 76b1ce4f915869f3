"""Per-domain training statistics that drive the domain mixture.

`DomainStats` is what the trainer reports for each domain it sampled in a step. It is a small frozen
dataclass (not a pydantic model) because hundreds of them are built every step; values are checked on
construction. `domain_stats_from_groups` computes one from GRPO-style groups of rewards.
Not here: how the statistics are turned into weights (`posttrain.curriculum.mixture`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from posttrain.types import rewards_differ


@dataclass(frozen=True, slots=True)
class DomainStats:
    """Statistics of one domain's samples in one training step."""

    n: int
    """Number of scored samples (rollouts) behind these numbers; 0 means "not observed"."""
    mean_reward: float
    """Mean reward over the samples."""
    pass_rate: float
    """Fraction of samples that passed, in [0, 1]."""
    mean_abs_advantage: float = 0.0
    """Mean |reward - group mean reward| over samples: the GRPO learning signal."""
    zero_variance_fraction: float = 0.0
    """Fraction of groups whose rewards were all equal (no gradient under GRPO)."""
    mean_response_tokens: float = 0.0
    """Mean number of tokens the policy generated per sample (0 when not reported)."""

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"DomainStats.n must be >= 0, got {self.n}")
        for name in ("mean_reward", "pass_rate", "mean_abs_advantage", "zero_variance_fraction",
                     "mean_response_tokens"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"DomainStats.{name} must be finite")
        for name in ("pass_rate", "zero_variance_fraction"):
            if not -1e-9 <= getattr(self, name) <= 1.0 + 1e-9:
                raise ValueError(f"DomainStats.{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.mean_abs_advantage < 0.0:
            raise ValueError("DomainStats.mean_abs_advantage must be >= 0")


def domain_stats_from_groups(
    rewards: Sequence[Sequence[float]],
    passed: Sequence[Sequence[bool]] | None = None,
    pass_threshold: float = 1.0,
    response_tokens: Sequence[Sequence[int]] | None = None,
) -> DomainStats:
    """Summarise one domain's groups (one inner sequence per prompt, one reward per sample).

    `passed` gives correctness per sample; without it a sample passes when reward >= pass_threshold.
    `response_tokens` (same shape) gives each sample's generated length.
    """
    flat = [float(r) for group in rewards for r in group]
    if not flat:
        return DomainStats(n=0, mean_reward=0.0, pass_rate=0.0)
    if passed is None:
        flags = [r >= pass_threshold for r in flat]
    else:
        flags = [bool(p) for group in passed for p in group]
        if len(flags) != len(flat):
            raise ValueError("passed must have the same shape as rewards")
    abs_adv_sum = 0.0
    num_flat_groups = 0
    for group in rewards:
        if not group:
            continue
        mean = sum(group) / len(group)
        abs_adv_sum += sum(abs(r - mean) for r in group)
        num_flat_groups += int(not rewards_differ(group))
    num_groups = sum(1 for group in rewards if group)
    return DomainStats(
        n=len(flat),
        mean_reward=sum(flat) / len(flat),
        pass_rate=sum(flags) / len(flat),
        mean_abs_advantage=abs_adv_sum / len(flat),
        zero_variance_fraction=num_flat_groups / num_groups,
        mean_response_tokens=sum(map(sum, response_tokens)) / len(flat) if response_tokens else 0.0,
    )
