"""Configs of the domain mixture: one frozen model per `kind`, joined in `MixtureConfig`.

Every mixture shares two nested blocks: `SignalConfig` (how fast per-domain estimates forget) and
`ShapingConfig` (what happens to the raw weights before they are used: unlearnable cap, hysteresis,
smoothing, floors and ceilings). The baselines default to no shaping at all, so `target_multiplicative`
with its defaults is exactly the rule "w *= 1.1 below target, else *= 0.95; normalise".
Not here: the behaviour (`posttrain.curriculum.rules`, `posttrain.curriculum.mixture`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from posttrain.config import StrictModel
from posttrain.plugins import PluginConfig


class SignalConfig(StrictModel):
    """Half-lives of the per-domain running estimates, in mixture updates."""

    fast_half_life_steps: float = Field(4.0, gt=0)
    """Half-life of the fast pass-rate estimate (what the domain does now)."""
    slow_half_life_steps: float = Field(20.0, gt=0)
    """Half-life of the slow estimate; fast minus slow is the learning progress."""


class ShapingConfig(StrictModel):
    """Post-processing of raw weights, applied in this order: cap, smoothing, floors and ceilings."""

    min_weight: float = Field(0.0, ge=0, le=1)
    """Absolute floor on every domain's weight (a domain spec's own floor may be higher)."""
    min_weight_vs_uniform: float = Field(0.0, ge=0, le=1)
    """Floor as a fraction of the uniform weight 1/num_domains."""
    max_weight: float = Field(1.0, gt=0, le=1)
    """Absolute ceiling on every domain's weight (a domain spec's own ceiling may be lower)."""
    max_weight_vs_uniform: float | None = Field(None, ge=1)
    """Ceiling as a multiple of the uniform weight; None for no such ceiling."""
    smoothing: float = Field(0.0, ge=0, lt=1)
    """Weight of the previous weights in an exponential moving average (0 = no smoothing)."""
    hysteresis: float = Field(0.0, ge=0, le=0.5)
    """Half-width of the pass-rate band around the target: a domain counts as "at target" after its
    estimate rises above target + hysteresis and stops after it falls below target - hysteresis."""
    unlearnable_cap: bool = False
    """Cap domains that stay below target without measurable progress."""
    unlearnable_min_samples: int = Field(256, ge=1)
    """Samples a domain must have had before it can be declared unlearnable."""
    unlearnable_min_gap: float = Field(0.15, ge=0, le=1)
    """Only a domain at least this far below its target (slow estimate) can be declared unlearnable, so
    a domain that plateaus near target is never starved into forgetting."""
    unlearnable_max_progress_z: float = Field(1.5, ge=0)
    """An update counts as "flat" while |z-score of pass-rate progress| is below this."""
    unlearnable_patience_steps: int = Field(20, ge=1)
    """Net flat updates (+1 flat, -3 otherwise; counted after 2 slow half-lives of history) before the
    cap applies."""
    unlearnable_release_margin: float = Field(0.1, ge=0, le=1)
    """Pass-rate rise over the level at capping that lifts the cap again."""
    unlearnable_release_z: float = Field(3.0, ge=0)
    """The rise that lifts the cap must also be this many standard errors of the slow estimate."""
    unlearnable_cap_vs_uniform: float = Field(0.2, ge=0, le=1)
    """Ceiling on a capped domain as a fraction of the uniform weight (raised to its floor if lower)."""


class _Base(StrictModel):
    target: float = Field(0.7, ge=0, le=1)
    """Pass rate at which a domain counts as learned (per-domain targets override it)."""
    signals: SignalConfig = SignalConfig()
    """Estimator half-lives."""
    shaping: ShapingConfig = ShapingConfig()
    """Cap, hysteresis, smoothing, floors and ceilings."""


class UniformMixtureConfig(_Base):
    """Every domain the same weight (the baseline every claim is measured against)."""

    kind: Literal["uniform"] = "uniform"


class StaticMixtureConfig(_Base):
    """Fixed ratios, normalised; domains not listed get `default_ratio`."""

    kind: Literal["static"] = "static"
    ratios: dict[str, float] = Field(default_factory=dict)
    """Relative weight per domain id."""
    default_ratio: float = Field(1.0, ge=0)
    """Relative weight of domains missing from `ratios`."""


class TargetMultiplicativeMixtureConfig(_Base):
    """The reference rule: multiply by `up_factor` below target, else by `down_factor`; normalise."""

    kind: Literal["target_multiplicative"] = "target_multiplicative"
    up_factor: float = Field(1.1, gt=0)
    """Factor for a domain whose last observed pass rate is below its target."""
    down_factor: float = Field(0.95, gt=0)
    """Factor for a domain at or above its target."""


class LearnabilityMixtureConfig(_Base):
    """Weight proportional to the learning signal: mean |advantage| or p(1-p)."""

    kind: Literal["learnability"] = "learnability"
    signal: Literal["abs_advantage", "p_one_minus_p"] = "abs_advantage"
    """Which learnability estimate to use."""
    exploration: float = Field(0.05, ge=0, le=1)
    """Share of the batch spread uniformly."""


class LearningProgressMixtureConfig(_Base):
    """Weight proportional to |fast - slow| pass-rate estimate (rises and drops both count)."""

    kind: Literal["learning_progress"] = "learning_progress"
    exploration: float = Field(0.1, ge=0, le=1)
    """Share of the batch spread uniformly."""


class BanditMixtureConfig(_Base):
    """Discounted EXP3 whose reward for a sampled domain is its absolute learning progress."""

    kind: Literal["bandit"] = "bandit"
    learning_rate: float = Field(0.5, gt=0)
    """Scale of the exponentiated cumulative reward."""
    discount: float = Field(0.95, gt=0, le=1)
    """Per-update discount of past rewards (non-stationarity)."""
    exploration: float = Field(0.1, ge=0, le=1)
    """Share of the batch spread uniformly (the EXP3 gamma)."""
    reward_scale: float = Field(20.0, gt=0)
    """Progress is multiplied by this before clipping the reward to [0, 1]."""


class DefaultMixtureConfig(_Base):
    """Gap-to-target times learnability, plus learning-progress and staleness bonuses, with maintenance
    weight for learned domains and a cap on domains that stay unlearnable."""

    kind: Literal["default"] = "default"
    maintenance: float = Field(0.05, ge=0)
    """Score of a domain at target relative to a domain just below target (prevents forgetting)."""
    below_target_floor: float = Field(0.05, ge=0)
    """Smallest need of a domain below target, so the last stretch to target is not starved."""
    learnability_floor: float = Field(0.05, ge=0)
    """Added to the learnability term so domains with a tiny pass rate are still tried."""
    progress_bonus: float = Field(2.0, ge=0)
    """Multiplier on positive progress z-scores (fast learners get more)."""
    forgetting_bonus: float = Field(2.0, ge=0)
    """Multiplier on negative progress z-scores (forgetting is caught early)."""
    staleness_bonus: float = Field(0.5, ge=0)
    """Bonus for domains whose evidence has decayed (not sampled for a while)."""
    gap_power: float = Field(1.0, ge=0)
    """Exponent of the normalised gap to target."""
    shaping: ShapingConfig = ShapingConfig(
        min_weight_vs_uniform=0.2,
        max_weight_vs_uniform=10.0,
        smoothing=0.3,
        hysteresis=0.02,
        unlearnable_cap=True,
    )
    """Defaults: floor 0.2/N, ceiling 10/N, light smoothing, small hysteresis, unlearnable cap on."""


class PluginMixtureConfig(PluginConfig, _Base):
    """An out-of-tree mixture: `plugin` names a factory `f(domains, targets, options) -> mixture`,
    called with `options=params`."""


MixtureConfig = Annotated[
    UniformMixtureConfig
    | StaticMixtureConfig
    | TargetMultiplicativeMixtureConfig
    | LearnabilityMixtureConfig
    | LearningProgressMixtureConfig
    | BanditMixtureConfig
    | DefaultMixtureConfig
    | PluginMixtureConfig,
    Field(discriminator="kind"),
]
"""Discriminated union of every mixture config, selected by `kind`."""

MIXTURE_CONFIG_ADAPTER: TypeAdapter[Any] = TypeAdapter(MixtureConfig)
"""Validates a plain mapping into the matching mixture config."""

BUILTIN_KINDS: tuple[str, ...] = (
    "uniform",
    "static",
    "target_multiplicative",
    "learnability",
    "learning_progress",
    "bandit",
    "default",
)
"""Kinds implemented in this package (everything but `plugin`)."""
