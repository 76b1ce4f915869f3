"""Curriculum: adaptive per-domain sampling weights, difficulty targeting inside a domain, dynamic
sampling of informative groups and per-domain loss weighting (compared on a simulator in `posttrain.bench`).

Pure Python + numpy; nothing here imports torch. Entry points:
  build_mixture(config, domains=[...], targets=..., min_weights=..., max_weights=...) -> DomainMixture
  build_mixture_for_specs(config, specs)   (the same, from DomainSpecs)
  DomainStats(n, mean_reward, pass_rate, mean_abs_advantage, zero_variance_fraction)
  MixtureConfig (discriminated union by `kind`), DefaultMixtureConfig
  fill_informative_groups(groups, draw, ...) -> (kept, FilterReport)      (dynamic sampling)
  domain_loss_coefficients(domain_ids, token_counts, weights, mode)        (loss weighting)
  DifficultyTargeter                                                       (levels inside a domain)
"""

from posttrain.curriculum.configs import (
    BanditMixtureConfig,
    DefaultMixtureConfig,
    LearnabilityMixtureConfig,
    LearningProgressMixtureConfig,
    MixtureConfig,
    PluginMixtureConfig,
    ShapingConfig,
    SignalConfig,
    StaticMixtureConfig,
    TargetMultiplicativeMixtureConfig,
    UniformMixtureConfig,
)
from posttrain.curriculum.difficulty import DifficultyConfig, DifficultyTargeter, group_levels
from posttrain.curriculum.dynamic_sampling import (
    DynamicSamplingConfig,
    FilterReport,
    FilterResult,
    fill_informative_groups,
)
from posttrain.curriculum.loss_weighting import DoubleWeightingError, WeightRouting, domain_loss_coefficients
from posttrain.curriculum.mixture import (
    DomainMixture,
    WeightedMixture,
    build_mixture,
    build_mixture_for_specs,
)
from posttrain.curriculum.stats import DomainStats, domain_stats_from_groups

__all__ = [
    "BanditMixtureConfig",
    "DefaultMixtureConfig",
    "DifficultyConfig",
    "DifficultyTargeter",
    "DomainMixture",
    "DomainStats",
    "DoubleWeightingError",
    "DynamicSamplingConfig",
    "FilterReport",
    "FilterResult",
    "WeightRouting",
    "domain_loss_coefficients",
    "fill_informative_groups",
    "group_levels",
    "LearnabilityMixtureConfig",
    "LearningProgressMixtureConfig",
    "MixtureConfig",
    "PluginMixtureConfig",
    "ShapingConfig",
    "SignalConfig",
    "StaticMixtureConfig",
    "TargetMultiplicativeMixtureConfig",
    "UniformMixtureConfig",
    "WeightedMixture",
    "build_mixture",
    "build_mixture_for_specs",
    "domain_stats_from_groups",
]
