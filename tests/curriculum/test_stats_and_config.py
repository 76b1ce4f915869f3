"""DomainStats, config parsing and build_mixture's inputs."""

from __future__ import annotations

import pytest

from posttrain.config import StrictModel
from posttrain.curriculum import (
    DefaultMixtureConfig,
    DomainStats,
    MixtureConfig,
    TargetMultiplicativeMixtureConfig,
    build_mixture,
    domain_stats_from_groups,
)
from posttrain.errors import ConfigError


def test_stats_from_groups_hand_values() -> None:
    # Group 1 rewards [1, 0, 1, 0] (mean 0.5, |adv| 0.5 each); group 2 [1, 1, 1, 1] (flat).
    # pass = 6/8; mean |adv| = (4 * 0.5 + 0) / 8 = 0.25; flat groups 1/2.
    stats = domain_stats_from_groups([[1, 0, 1, 0], [1, 1, 1, 1]])
    assert stats == DomainStats(n=8, mean_reward=0.75, pass_rate=0.75, mean_abs_advantage=0.25,
                                zero_variance_fraction=0.5)


def test_stats_report_the_mean_response_length() -> None:
    # lengths (3, 5) and (4, 8): 20 tokens over 4 samples -> 5.0
    stats = domain_stats_from_groups([[1, 0], [0, 0]], response_tokens=[[3, 5], [4, 8]])
    assert stats.mean_response_tokens == 5.0
    assert domain_stats_from_groups([[1, 0]]).mean_response_tokens == 0.0


def test_stats_reject_pass_rate_outside_unit_interval() -> None:
    with pytest.raises(ValueError):
        DomainStats(n=1, mean_reward=0.0, pass_rate=1.5)


def test_unknown_kind_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_mixture({"kind": "nope"}, domains=["a"])


def test_unknown_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_mixture({"kind": "uniform", "colour": "red"}, domains=["a"])


def test_model_config_is_accepted() -> None:
    mixture = build_mixture(TargetMultiplicativeMixtureConfig(target=0.5), domains=["a", "b"])
    assert mixture.weights() == {"a": 0.5, "b": 0.5}


def test_union_embeds_in_a_parent_config_with_default() -> None:
    class Trainer(StrictModel):
        mixture: MixtureConfig = DefaultMixtureConfig()

    assert Trainer().mixture.kind == "default"
    assert Trainer.model_validate({"mixture": {"kind": "bandit"}}).mixture.kind == "bandit"


def test_per_domain_max_weight_is_respected() -> None:
    mixture = build_mixture({"kind": "static", "ratios": {"a": 100.0}}, domains=["a", "b", "c"],
                            max_weights={"a": 0.2})
    assert mixture.weights()["a"] == pytest.approx(0.2)


def test_per_domain_min_weight_is_respected() -> None:
    mixture = build_mixture({"kind": "static", "ratios": {"a": 100.0}}, domains=["a", "b", "c"],
                            min_weights={"c": 0.3})
    assert mixture.weights()["c"] == pytest.approx(0.3)


def test_duplicate_domains_are_rejected() -> None:
    with pytest.raises(ConfigError):
        build_mixture({"kind": "uniform"}, domains=["a", "a"])


def test_build_from_specs_uses_their_targets_and_bounds() -> None:
    from posttrain.curriculum import build_mixture_for_specs
    from posttrain.types import DomainSpec

    specs = [DomainSpec(id=f"m/f/d{i}", family_kind="k", source="builtin", verifier="v", max_weight=0.4,
                        target_pass_rate=0.9) for i in range(3)]
    mixture = build_mixture_for_specs({"kind": "static", "ratios": {"m/f/d0": 50.0}}, specs)
    assert mixture.weights()["m/f/d0"] == pytest.approx(0.4)
    assert mixture.targets.tolist() == [0.9, 0.9, 0.9]  # type: ignore[attr-defined]


def _plugin_factory(domains: list[str], targets: dict[str, float], options: dict[str, object]) -> object:
    from posttrain.curriculum import build_mixture as build

    return build({"kind": "static", "ratios": {domains[0]: float(options["first"])}}, domains=domains)  # type: ignore[arg-type]


def test_plugin_factory_is_loaded_by_path() -> None:
    # Plugin returns static ratios 3:1 -> [0.75, 0.25].
    mixture = build_mixture({"kind": "plugin", "plugin": f"{__name__}:_plugin_factory", "params": {"first": 3}},
                            domains=["a", "b"])
    assert mixture.weights() == pytest.approx({"a": 0.75, "b": 0.25})


def test_missing_plugin_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        build_mixture({"kind": "plugin", "plugin": "no.such.module:thing"}, domains=["a"])
