"""Floors/ceilings projection, unlearnable cap and hysteresis."""

from __future__ import annotations

import numpy as np
import pytest

from posttrain.curriculum import DomainStats, build_mixture
from posttrain.curriculum.shaping import allocate_counts, project_to_bounds


def test_projection_hand_example() -> None:
    # raw [8, 1, 1], ceiling 0.5 everywhere, floor 0: c*8 clips at 0.5, the other two share the rest
    # equally -> [0.5, 0.25, 0.25].
    weights = project_to_bounds(np.array([8.0, 1.0, 1.0]), np.zeros(3), np.full(3, 0.5))
    assert weights == pytest.approx([0.5, 0.25, 0.25])


def test_projection_raises_floors_and_keeps_ratios_of_free_domains() -> None:
    # raw [6, 3, 0, 1], floor 0.1: the zero domain rises to 0.1, the other three keep ratio 6:3:1 in the
    # remaining 0.9 -> [0.54, 0.27, 0.1, 0.09]? 0.09 < 0.1 so it is floored too; then 6:3 share 0.8
    # -> [0.5333, 0.2667, 0.1, 0.1].
    weights = project_to_bounds(np.array([6.0, 3.0, 0.0, 1.0]), np.full(4, 0.1), np.ones(4))
    assert weights == pytest.approx([0.8 * 2 / 3, 0.8 / 3, 0.1, 0.1])


def test_allocation_hits_floor_and_ceiling_of_expectation() -> None:
    weights = np.array([0.55, 0.3, 0.15])
    counts = allocate_counts(weights, 10, np.random.default_rng(0))
    expected = weights * 10  # [5.5, 3, 1.5]
    assert np.all(counts >= np.floor(expected)) and np.all(counts <= np.ceil(expected))


def test_infeasible_floors_are_a_config_error() -> None:
    from posttrain.errors import ConfigError

    with pytest.raises(ConfigError):
        build_mixture({"kind": "uniform", "shaping": {"min_weight": 0.5}}, domains=["a", "b", "c"])


def _flat(pass_rate: float, n: int = 64) -> DomainStats:
    # abs advantage of a binary group ~ 2p(1-p)
    return DomainStats(n=n, mean_reward=pass_rate, pass_rate=pass_rate,
                       mean_abs_advantage=2 * pass_rate * (1 - pass_rate))


def test_domain_without_progress_gets_capped() -> None:
    # "stuck" sits at 0.3 forever (guessable); the others climb steadily from 0.1 towards 0.6.
    domains = ["stuck", "a", "b", "c"]
    mixture = build_mixture({"kind": "default"}, domains=domains)
    for step in range(200):
        climbing = min(0.1 + step * 0.0025, 0.6)
        mixture.update({"stuck": _flat(0.3), **{d: _flat(climbing) for d in domains[1:]}}, step=step)
    # Cap = 0.2 x uniform = 0.05 (the default floor is the same 0.2 x uniform).
    assert mixture.weights()["stuck"] == pytest.approx(0.05)


def test_hysteresis_keeps_at_target_inside_the_band() -> None:
    # Target 0.7, band 0.1: a domain enters "at target" above 0.8 and only leaves below 0.6, so
    # dropping to 0.65 keeps it at target.
    mixture = build_mixture({"kind": "default", "target": 0.7, "shaping": {"hysteresis": 0.1}},
                            domains=["a", "b"])
    for step in range(30):
        mixture.update({"a": _flat(0.9)}, step=step)
    for step in range(30, 60):
        mixture.update({"a": _flat(0.65)}, step=step)
    assert mixture.tracker.at_target[0]  # type: ignore[attr-defined]
