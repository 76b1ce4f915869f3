"""The reference rule on hand-worked examples."""

from __future__ import annotations

import pytest

from posttrain.curriculum import DomainStats, build_mixture


def _stats(pass_rate: float) -> DomainStats:
    return DomainStats(n=32, mean_reward=pass_rate, pass_rate=pass_rate)


def test_one_step_three_domains() -> None:
    # Start uniform (1/3 each); a below target (0.4 < 0.8): x1.1; b, c above: x0.95.
    # Unnormalised: [1.1, 0.95, 0.95] / 3, sum = 3.0 / 3 = 1 -> [0.36667, 0.31667, 0.31667].
    mixture = build_mixture({"kind": "target_multiplicative", "target": 0.8}, domains=["a", "b", "c"])
    mixture.update({"a": _stats(0.4), "b": _stats(0.9), "c": _stats(0.85)}, step=1)
    weights = mixture.weights()
    assert weights["a"] == pytest.approx(1.1 / 3)
    assert weights["b"] == pytest.approx(0.95 / 3)
    assert weights["c"] == pytest.approx(0.95 / 3)


def test_two_steps_with_unobserved_domain_keeps_last_value() -> None:
    # Step 1: a below (x1.1), b above (x0.95), c never seen (x1): [1.1, 0.95, 1] / 3.05.
    # Step 2: only b observed, now below (0.5 < 0.8): a keeps its last value (below, x1.1), b x1.1,
    # c unseen x1: [1.21, 1.045, 1] / 3.05, normalised by 3.255 -> [0.371736, 0.321045, 0.307220].
    mixture = build_mixture({"kind": "target_multiplicative", "target": 0.8}, domains=["a", "b", "c"])
    mixture.update({"a": _stats(0.4), "b": _stats(0.9)}, step=1)
    mixture.update({"b": _stats(0.5)}, step=2)
    weights = mixture.weights()
    assert weights["a"] == pytest.approx(1.21 / 3.255)
    assert weights["b"] == pytest.approx(1.045 / 3.255)
    assert weights["c"] == pytest.approx(1.0 / 3.255)


def test_per_domain_targets_override_the_config() -> None:
    # a's own target 0.3 makes 0.4 "above" -> x0.95; b (target 0.8) below -> x1.1:
    # [0.95, 1.1] / 2.05.
    mixture = build_mixture({"kind": "target_multiplicative", "target": 0.8}, domains=["a", "b"],
                            targets={"a": 0.3})
    mixture.update({"a": _stats(0.4), "b": _stats(0.4)}, step=1)
    assert mixture.weights()["a"] == pytest.approx(0.95 / 2.05)


def test_factors_are_configurable() -> None:
    # up 2.0 for a (below), down 0.5 for b (above): [2, 0.5] / 2.5 = [0.8, 0.2].
    mixture = build_mixture({"kind": "target_multiplicative", "up_factor": 2.0, "down_factor": 0.5},
                            domains=["a", "b"])
    mixture.update({"a": _stats(0.1), "b": _stats(0.95)}, step=1)
    assert mixture.weights()["a"] == pytest.approx(0.8)
