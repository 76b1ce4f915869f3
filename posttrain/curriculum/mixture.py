"""The domain mixture: `build_mixture(config, domains=...)` and the `DomainMixture` protocol.

Every built-in kind is one `WeightedMixture` composed of a `DomainTracker` (running estimates), a
`WeightRule` (the kind's policy) and the shared shaping (unlearnable cap, smoothing, floors/ceilings).
Guarantees after construction and after every `update`: weights are finite, sum to 1 and respect every
floor and ceiling; `batch_counts` sums to the batch size; `state_dict` is JSON-serialisable and
`load_state_dict` restores behaviour exactly. Domains missing from an `update` were not sampled that
step: their estimates keep their value but lose evidence. Not here: sampling tasks inside a domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import ValidationError

from posttrain.config import format_validation_error
from posttrain.curriculum import rules
from posttrain.curriculum.configs import (
    MIXTURE_CONFIG_ADAPTER,
    BanditMixtureConfig,
    DefaultMixtureConfig,
    LearnabilityMixtureConfig,
    LearningProgressMixtureConfig,
    PluginMixtureConfig,
    ShapingConfig,
    StaticMixtureConfig,
    TargetMultiplicativeMixtureConfig,
    UniformMixtureConfig,
)
from posttrain.curriculum.shaping import allocate_counts, effective_bounds, project_to_bounds, smooth
from posttrain.curriculum.stats import DomainStats
from posttrain.curriculum.tracker import DomainTracker
from posttrain.errors import ConfigError
from posttrain.plugins import Builders, build_plugin
from posttrain.types import DomainSpec


@runtime_checkable
class DomainMixture(Protocol):
    """Per-domain sampling weights that adapt to training statistics."""

    domains: tuple[str, ...]

    def weights(self) -> dict[str, float]: ...

    def update(self, stats: Mapping[str, DomainStats], step: int) -> None: ...

    def batch_counts(self, batch_size: int, rng: np.random.Generator) -> dict[str, int]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class WeightedMixture:
    """Tracker + rule + shaping; see the module docstring for the guarantees."""

    def __init__(
        self,
        kind: str,
        domains: Sequence[str],
        targets: np.ndarray,
        rule: rules.WeightRule,
        tracker: DomainTracker,
        shaping: ShapingConfig,
        bounds: tuple[np.ndarray, np.ndarray],
    ):
        self.kind = kind
        self.domains = tuple(domains)
        self.index = {d: i for i, d in enumerate(self.domains)}
        self.targets = targets
        self.rule = rule
        self.tracker = tracker
        self.shaping = shaping
        self.lo, self.hi = bounds
        self.last_step = -1
        self.current = project_to_bounds(rule.initial_weights(), self.lo, self.hi)

    def weights(self) -> dict[str, float]:
        return dict(zip(self.domains, self.current.tolist(), strict=True))

    def update(self, stats: Mapping[str, DomainStats], step: int) -> None:
        unknown = [name for name in stats if name not in self.index]
        if unknown:
            raise KeyError(f"update for unknown domains {unknown[:5]}")
        seen = self.tracker.observe(self.index, stats, step)
        raw = self.rule.raw_weights(self.tracker, self.current, seen)
        total = float(np.sum(raw))
        proposed = raw / total if np.isfinite(total) and total > 0 else np.full_like(raw, 1.0 / raw.size)
        mixed = smooth(self.current, proposed, self.shaping.smoothing)
        self.current = project_to_bounds(mixed, self.lo, self._ceilings())
        self.last_step = step

    def _ceilings(self) -> np.ndarray:
        if not self.shaping.unlearnable_cap or not self.tracker.stuck.any():
            return self.hi
        cap = self.shaping.unlearnable_cap_vs_uniform / len(self.domains)
        capped = np.where(self.tracker.stuck, np.maximum(np.minimum(self.hi, cap), self.lo), self.hi)
        # If nearly everything is stuck the caps cannot hold a full batch; fall back to plain ceilings.
        return capped if capped.sum() >= 1.0 else self.hi

    def batch_counts(self, batch_size: int, rng: np.random.Generator) -> dict[str, int]:
        counts = allocate_counts(self.current, batch_size, rng)
        return dict(zip(self.domains, counts.tolist(), strict=True))

    def unlearnable(self) -> list[str]:
        """Domains currently held at the unlearnable cap."""
        return [d for d, s in zip(self.domains, self.tracker.stuck.tolist(), strict=True) if s]

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "domains": list(self.domains),
            "last_step": self.last_step,
            "weights": self.current.tolist(),
            "tracker": self.tracker.state_dict(),
            "rule": rules.rule_state(self.rule),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind or list(state.get("domains", [])) != list(self.domains):
            raise ValueError("mixture state is for a different kind or domain list")
        self.last_step = int(state["last_step"])
        self.current = np.asarray(state["weights"], dtype=float)
        self.tracker.load_state_dict(state["tracker"])
        rules.load_rule_state(self.rule, state["rule"])


def parse_mixture_config(config: Mapping[str, Any] | Any) -> Any:
    """A mixture config model from a mapping (validated) or an existing model (returned as is)."""
    if isinstance(config, Mapping):
        try:
            return MIXTURE_CONFIG_ADAPTER.validate_python(dict(config))
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, "curriculum mixture")) from None
    return config


def build_mixture(
    config: Mapping[str, Any] | Any,
    domains: Sequence[str],
    targets: Mapping[str, float] | None = None,
    min_weights: Mapping[str, float] | None = None,
    max_weights: Mapping[str, float] | None = None,
) -> DomainMixture:
    """Build the mixture for `config` (a mapping with `kind`, or a `MixtureConfig` model).

    `targets`, `min_weights`, `max_weights` override the config per domain id (e.g. from DomainSpecs).
    """
    cfg = parse_mixture_config(config)
    if not domains or len(set(domains)) != len(domains):
        raise ConfigError("curriculum: domains must be a non-empty list of distinct ids")
    if isinstance(cfg, PluginMixtureConfig):
        return _build_plugin(cfg, domains, targets)
    target_array = np.array([(targets or {}).get(d, cfg.target) for d in domains], dtype=float)
    bounds = effective_bounds(domains, cfg.shaping, min_weights, max_weights)
    tracker = DomainTracker(len(domains), target_array, cfg.signals, cfg.shaping)
    rule = RULES.build(cfg, domains)
    return WeightedMixture(cfg.kind, domains, target_array, rule, tracker, cfg.shaping, bounds)


def build_mixture_for_specs(config: Mapping[str, Any] | Any, specs: Sequence[DomainSpec]) -> DomainMixture:
    """`build_mixture` with domains, targets and weight bounds taken from the domain specs."""
    return build_mixture(
        config,
        domains=[spec.id for spec in specs],
        targets={spec.id: spec.target_pass_rate for spec in specs},
        min_weights={spec.id: spec.min_weight for spec in specs},
        max_weights={spec.id: spec.max_weight for spec in specs},
    )


RULES: Builders[rules.WeightRule] = Builders("curriculum mixture rule", {
    UniformMixtureConfig: lambda cfg, domains: rules.UniformRule(len(domains)),
    StaticMixtureConfig: lambda cfg, domains: rules.StaticRule(domains, cfg),
    TargetMultiplicativeMixtureConfig: lambda cfg, domains: rules.TargetMultiplicativeRule(len(domains), cfg),
    LearnabilityMixtureConfig: lambda cfg, domains: rules.learnability_rule(len(domains), cfg),
    LearningProgressMixtureConfig: lambda cfg, domains: rules.learning_progress_rule(len(domains), cfg),
    BanditMixtureConfig: lambda cfg, domains: rules.BanditRule(len(domains), cfg),
    DefaultMixtureConfig: lambda cfg, domains: rules.DefaultRule(len(domains), cfg),
})


def _build_plugin(
    cfg: PluginMixtureConfig, domains: Sequence[str], targets: Mapping[str, float] | None
) -> DomainMixture:
    mixture: DomainMixture = build_plugin(
        cfg.plugin, DomainMixture, "DomainMixture",
        domains=list(domains), targets=dict(targets or {}), options=cfg.params,
    )
    return mixture
