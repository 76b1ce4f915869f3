"""Weight rules: the part of each mixture `kind` that turns tracked estimates into raw weights.

A rule is stateless apart from what it declares in `state_dict`; the surrounding `WeightedMixture`
owns the tracker, the unlearnable cap, smoothing and bounds. Raw weights need not be normalised.
Rules:
  uniform               ones.
  static                fixed ratios.
  target_multiplicative previous weights times up/down factor by "last pass rate below target"
                        (the reference rule; hysteresis widens "below"/"above" into a band).
  learnability          mean |advantage| (or p(1-p)), mixed with uniform exploration.
  learning_progress     |fast - slow pass rate| (TSCL-style: rises and drops), mixed with uniform.
  bandit                discounted EXP3 over domains; reward = absolute learning progress.
  default               gap-to-target x learnability x progress, maintenance for learned domains,
                        staleness bonus; unlearnable domains are capped by the mixture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from posttrain.curriculum.configs import (
    BanditMixtureConfig,
    DefaultMixtureConfig,
    LearnabilityMixtureConfig,
    LearningProgressMixtureConfig,
    StaticMixtureConfig,
    TargetMultiplicativeMixtureConfig,
)
from posttrain.curriculum.tracker import DomainTracker


class WeightRule(Protocol):
    """Maps tracked estimates (and the current weights) to raw, unnormalised weights."""

    def initial_weights(self) -> np.ndarray: ...

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray: ...

    @property
    def state_fields(self) -> tuple[str, ...]:
        """Names of the float-array attributes that change as it learns (saved and restored by
        `rule_state` / `load_rule_state`; NaN is stored as None)."""
        ...


def rule_state(rule: WeightRule) -> dict[str, list[float | None]]:
    """The rule's learned arrays, JSON-safe."""
    return {name: [None if np.isnan(v) else v for v in getattr(rule, name).tolist()] for name in rule.state_fields}


def load_rule_state(rule: WeightRule, state: Mapping[str, Any]) -> None:
    """Restore what `rule_state` saved."""
    for name in rule.state_fields:
        setattr(rule, name, np.array([np.nan if v is None else v for v in state[name]], dtype=float))


def _mix_uniform(scores: np.ndarray, exploration: float) -> np.ndarray:
    total = scores.sum()
    share = scores / total if total > 0 else np.full_like(scores, 1.0 / scores.size)
    return (1.0 - exploration) * share + exploration / scores.size


class UniformRule:
    state_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, num_domains: int):
        self.num_domains = num_domains

    def initial_weights(self) -> np.ndarray:
        return np.ones(self.num_domains)

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        return np.ones(self.num_domains)


class StaticRule:
    state_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, domains: Sequence[str], config: StaticMixtureConfig):
        self.ratios = np.array([config.ratios.get(d, config.default_ratio) for d in domains], dtype=float)

    def initial_weights(self) -> np.ndarray:
        return self.ratios.copy()

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        return self.ratios.copy()


class TargetMultiplicativeRule:
    """w *= up if last pass < target else down; the mixture normalises (and, if asked, shapes)."""

    state_fields: ClassVar[tuple[str, ...]] = ("below",)

    def __init__(self, num_domains: int, config: TargetMultiplicativeMixtureConfig):
        self.config = config
        self.num_domains = num_domains
        self.below = np.full(num_domains, np.nan)

    def initial_weights(self) -> np.ndarray:
        return np.ones(self.num_domains)

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        band = tracker.shaping.hysteresis
        last = tracker.last_pass
        known = ~np.isnan(last)
        below_now = known & (last < tracker.targets - band)
        above_now = known & (last >= tracker.targets + band)
        self.below = np.where(below_now, 1.0, np.where(above_now, 0.0, self.below))
        factor = np.where(np.isnan(self.below), 1.0,
                          np.where(self.below == 1.0, self.config.up_factor, self.config.down_factor))
        return current * factor


class SignalRule:
    """Weights proportional to a per-domain signal of the tracker, mixed with uniform exploration: the
    learnability rule's mean |advantage| or p(1-p), the learning-progress rule's |fast - slow| pass rate."""

    state_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, num_domains: int, signal: Callable[[DomainTracker], np.ndarray], exploration: float):
        self.num_domains = num_domains
        self.signal = signal
        self.exploration = exploration

    def initial_weights(self) -> np.ndarray:
        return np.ones(self.num_domains)

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        return _mix_uniform(self.signal(tracker), self.exploration)


def learnability_rule(num_domains: int, config: LearnabilityMixtureConfig) -> SignalRule:
    if config.signal == "abs_advantage":
        return SignalRule(num_domains, lambda tracker: tracker.abs_advantage, config.exploration)
    return SignalRule(num_domains, lambda tracker: tracker.pass_fast * (1.0 - tracker.pass_fast), config.exploration)


def learning_progress_rule(num_domains: int, config: LearningProgressMixtureConfig) -> SignalRule:
    return SignalRule(num_domains, lambda tracker: np.abs(tracker.pass_fast - tracker.pass_slow), config.exploration)


class BanditRule:
    """Discounted EXP3 (Exp3 with forgetting) over domains.

    Each update, a sampled domain earns reward clip(scale * |fast - slow|, 0, 1), importance-weighted by
    the chance it was sampled; cumulative estimates are discounted so old progress stops counting.
    """

    state_fields: ClassVar[tuple[str, ...]] = ("gains",)

    def __init__(self, num_domains: int, config: BanditMixtureConfig):
        self.config = config
        self.num_domains = num_domains
        self.gains = np.zeros(num_domains)

    def initial_weights(self) -> np.ndarray:
        return np.ones(self.num_domains)

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        cfg = self.config
        reward = np.clip(cfg.reward_scale * np.abs(tracker.pass_fast - tracker.pass_slow), 0.0, 1.0)
        # With batches, a domain of weight w is seen about w * N times per step; treat w * N >= 1 as
        # "always observed" and divide by the observation chance below that.
        chance = np.clip(current * self.num_domains, 1e-3, 1.0)
        self.gains = cfg.discount * self.gains + np.where(seen, reward / chance, 0.0)
        logits = cfg.learning_rate * (self.gains - self.gains.max())
        return _mix_uniform(np.exp(logits), cfg.exploration)


class DefaultRule:
    """need(gap to target) x learnability x progress multiplier + staleness bonus."""

    state_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, num_domains: int, config: DefaultMixtureConfig):
        self.config = config
        self.num_domains = num_domains

    def initial_weights(self) -> np.ndarray:
        return np.ones(self.num_domains)

    def raw_weights(self, tracker: DomainTracker, current: np.ndarray, seen: np.ndarray) -> np.ndarray:
        cfg = self.config
        p = tracker.pass_fast
        gap = np.clip((tracker.targets - p) / np.maximum(tracker.targets, 1e-6), 0.0, 1.0)
        need = np.where(tracker.at_target, cfg.maintenance, np.maximum(gap**cfg.gap_power, cfg.below_target_floor))
        learn = cfg.learnability_floor + 2.0 * tracker.abs_advantage
        z = tracker.progress_z
        progress = (1.0 + cfg.progress_bonus * np.tanh(np.maximum(z, 0.0) / 3.0)
                    + cfg.forgetting_bonus * np.tanh(np.maximum(-z, 0.0) / 3.0))
        score = need * learn * progress
        typical_n = max(float(np.mean(tracker.fast_n)), 1.0)
        stale = 1.0 / (1.0 + tracker.fast_n / typical_n)
        return score + cfg.staleness_bonus * stale * float(np.mean(score))
