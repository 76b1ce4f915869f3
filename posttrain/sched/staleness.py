"""Bounded staleness: what the learner does with samples made by older weights than its own.

The staleness of a sample is the learner's weight version minus the version that sampled it
(`Trajectory.policy_version`). Within `max_staleness` a sample keeps weight 1. Beyond it, `drop` removes
it (it is counted, never trained on) and `downweight` keeps it with weight `1 / (1 + excess)`, where
`excess = staleness - max_staleness`, so one version too old halves its share of the loss and two
thirds it. Pure and deterministic; it neither reads nor changes the samples themselves.
Not here: producing samples ahead of the learner (`posttrain.train.producer`) or applying the weights
to a batch (`posttrain.train.run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

StalePolicy = Literal["drop", "downweight"]
"""What happens to a sample beyond `max_staleness`."""


def sample_staleness(learner_version: int, policy_version: int) -> int:
    """Versions between the learner and the sample's sampler; a sample from the future is an error."""
    if policy_version > learner_version:
        raise ValueError(f"sample of version {policy_version} is newer than the learner's {learner_version}")
    return learner_version - policy_version


def stale_weight(staleness: int, max_staleness: int, policy: StalePolicy) -> float | None:
    """The sample's loss weight: 1 within the bound; beyond it None (drop) or 1 / (1 + excess)."""
    excess = staleness - max_staleness
    if excess <= 0:
        return 1.0
    return None if policy == "drop" else 1.0 / (1 + excess)


@dataclass(frozen=True)
class StalenessReport:
    """The rule applied to a batch's samples, in their order."""

    weights: tuple[float | None, ...]
    """Per sample: its loss weight, or None when it is dropped."""
    mean: float
    """Mean staleness over every sample (dropped ones included); 0 for no samples."""
    max: int
    """Largest staleness; 0 for no samples."""
    num_dropped: int
    """Samples dropped."""

    @property
    def all_fresh(self) -> bool:
        """Every sample kept with weight 1: the batch is exactly what it would be without the rule."""
        return all(w == 1.0 for w in self.weights)


def apply_staleness(
    policy_versions: Sequence[int], learner_version: int, max_staleness: int, policy: StalePolicy
) -> StalenessReport:
    """The rule over samples of the given versions, for a learner at `learner_version`."""
    if max_staleness < 0:
        raise ValueError("max_staleness must be >= 0")
    ages = [sample_staleness(learner_version, v) for v in policy_versions]
    weights = tuple(stale_weight(a, max_staleness, policy) for a in ages)
    return StalenessReport(
        weights=weights,
        mean=sum(ages) / len(ages) if ages else 0.0,
        max=max(ages, default=0),
        num_dropped=sum(w is None for w in weights),
    )
