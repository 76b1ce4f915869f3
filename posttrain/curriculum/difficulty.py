"""Difficulty targeting inside a domain: move sampling across its levels towards a target pass rate.

In the spirit of adaptive-difficulty fine-tuning (AdaRFT): each domain keeps a continuous position x on
its ordered levels (0 = easiest); after each step x moves by `step_size * tanh(sensitivity * (p - target))`
where p is the pass rate the domain just showed, so an easy domain climbs and a hard one descends.
Level probabilities are a Gaussian bump around x (width `spread` levels) with a floor, so every level
keeps being seen. Level names follow `posttrain.types.LEVELS` (easy, medium, hard); domain ids
`base@level` are grouped by `group_levels`. Not here: choosing how many samples a domain gets
(the domain mixture does that) or which task of a level is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field

from posttrain.config import StrictModel
from posttrain.curriculum.shaping import allocate_counts
from posttrain.types import LEVELS


class DifficultyConfig(StrictModel):
    """How the level position follows the pass rate."""

    kind: Literal["target_pass_rate"] = "target_pass_rate"
    target_pass_rate: float = Field(0.5, gt=0, lt=1)
    """Pass rate to steer towards (0.5 maximises the GRPO signal p(1-p))."""
    step_size: float = Field(0.3, gt=0)
    """Largest move of the level position per update, in levels."""
    sensitivity: float = Field(5.0, gt=0)
    """Slope of tanh around the target."""
    spread: float = Field(0.6, gt=0)
    """Width of the Gaussian bump over levels."""
    min_level_prob: float = Field(0.05, ge=0, lt=1)
    """Every level keeps at least this probability (before renormalisation)."""
    start: Literal["easiest", "middle"] = "easiest"
    """Initial position."""
    level_half_life_steps: float = Field(10.0, gt=0)
    """Half-life of the per-level pass-rate estimates behind `balanced_pass_rate`."""


def group_levels(domain_ids: Sequence[str]) -> dict[str, list[str]]:
    """`{"m/a/add": ["m/a/add@easy", "m/a/add@hard"], "x/y/z": ["x/y/z"]}`, levels easiest first."""
    order = {name: i for i, name in enumerate(LEVELS)}
    groups: dict[str, list[str]] = {}
    for domain_id in domain_ids:
        base, _, _level = domain_id.partition("@")
        groups.setdefault(base, []).append(domain_id)
    for members in groups.values():
        members.sort(key=lambda d: (order.get(d.partition("@")[2], len(order)), d))
    return groups


def level_balanced_pass_rate(passes: Sequence[float], samples: Sequence[float]) -> float | None:
    """Mean over the levels that have samples of each level's pass rate (None if none has samples)."""
    rates = [p / n for p, n in zip(passes, samples, strict=True) if n > 0]
    return sum(rates) / len(rates) if rates else None


class DifficultyTargeter:
    """Per-domain level positions; `level_probs`, `update`, `split_counts`, `state_dict`."""

    def __init__(self, levels: Mapping[str, Sequence[str]], config: DifficultyConfig | None = None):
        self.config = config or DifficultyConfig()
        self.levels = {domain: list(names) for domain, names in levels.items()}
        if any(not names for names in self.levels.values()):
            raise ValueError("every domain needs at least one level")
        start = 0.0 if self.config.start == "easiest" else None
        self.position = {d: (start if start is not None else (len(n) - 1) / 2) for d, n in self.levels.items()}
        self.level_decay = 0.5 ** (1.0 / self.config.level_half_life_steps)
        self.level_passes = {d: np.zeros(len(n)) for d, n in self.levels.items()}
        self.level_samples = {d: np.zeros(len(n)) for d, n in self.levels.items()}

    def level_probs_array(self, domain: str) -> np.ndarray:
        cfg = self.config
        num = len(self.levels[domain])
        bump = np.exp(-0.5 * ((np.arange(num) - self.position[domain]) / cfg.spread) ** 2)
        probs = np.maximum(bump / bump.sum(), cfg.min_level_prob)
        return probs / probs.sum()

    def level_probs(self, domain: str) -> dict[str, float]:
        return dict(zip(self.levels[domain], self.level_probs_array(domain).tolist(), strict=True))

    def update(
        self,
        domain: str,
        pass_rate: float,
        n: int = 1,
        level_passes: Sequence[float] | None = None,
        level_samples: Sequence[float] | None = None,
    ) -> None:
        """Move the domain's position after it showed `pass_rate` on `n` samples (n = 0: no move).

        With per-level counts (passes and samples, easiest first) it also updates the per-level
        estimates behind `balanced_pass_rate`.
        """
        if n <= 0:
            return
        cfg = self.config
        move = cfg.step_size * float(np.tanh(cfg.sensitivity * (pass_rate - cfg.target_pass_rate)))
        top = len(self.levels[domain]) - 1
        self.position[domain] = float(np.clip(self.position[domain] + move, 0.0, top))
        if level_passes is not None and level_samples is not None:
            self.level_passes[domain] = self.level_decay * self.level_passes[domain] + np.asarray(level_passes)
            self.level_samples[domain] = self.level_decay * self.level_samples[domain] + np.asarray(level_samples)

    def balanced_pass_rate(self, domain: str) -> float | None:
        """Equal-weight mean of the per-level estimates (levels never seen are left out; None if none).

        Report this, not the raw pass rate, to a domain mixture when levels are targeted: the raw rate
        is steered towards the difficulty target and stops measuring progress towards the domain's.
        """
        return level_balanced_pass_rate(self.level_passes[domain].tolist(), self.level_samples[domain].tolist())

    def split_counts(self, domain: str, count: int, rng: np.random.Generator) -> dict[str, int]:
        """Split a domain's prompt count across its levels (unbiased, sums to `count`)."""
        counts = allocate_counts(self.level_probs_array(domain), count, rng)
        return dict(zip(self.levels[domain], counts.tolist(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        return {
            "position": dict(self.position),
            "level_passes": {d: v.tolist() for d, v in self.level_passes.items()},
            "level_samples": {d: v.tolist() for d, v in self.level_samples.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        position = dict(state["position"])
        if set(position) != set(self.levels):
            raise ValueError("difficulty state is for a different set of domains")
        self.position = {d: float(v) for d, v in position.items()}
        self.level_passes = {d: np.asarray(v, dtype=float) for d, v in state["level_passes"].items()}
        self.level_samples = {d: np.asarray(v, dtype=float) for d, v in state["level_samples"].items()}
