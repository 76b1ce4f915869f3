"""Invariants every built-in mixture keeps: normalised, bounded, deterministic, restorable."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrain.curriculum import DomainStats, build_mixture
from posttrain.curriculum.configs import BUILTIN_KINDS
from posttrain.curriculum.mixture import DomainMixture

DOMAINS = [f"d{i}" for i in range(6)]
SHAPING = {"min_weight": 0.05, "max_weight": 0.4, "smoothing": 0.3, "hysteresis": 0.05,
           "unlearnable_cap": True, "unlearnable_min_samples": 8, "unlearnable_patience_steps": 2}

stats_strategy = st.builds(
    DomainStats,
    n=st.integers(0, 64),
    mean_reward=st.floats(0, 1),
    pass_rate=st.floats(0, 1),
    mean_abs_advantage=st.floats(0, 0.5),
    zero_variance_fraction=st.floats(0, 1),
)
step_strategy = st.dictionaries(st.sampled_from(DOMAINS), stats_strategy, max_size=len(DOMAINS))


def _random_updates(mixture: DomainMixture, seed: int, steps: int) -> None:
    rng = np.random.default_rng(seed)
    for step in range(steps):
        chosen = rng.choice(DOMAINS, size=rng.integers(0, len(DOMAINS) + 1), replace=False)
        mixture.update({d: DomainStats(n=int(rng.integers(1, 40)), mean_reward=0.5,
                                       pass_rate=float(rng.random()), mean_abs_advantage=float(rng.random() / 2),
                                       zero_variance_fraction=float(rng.random())) for d in chosen}, step=step)


@pytest.mark.parametrize("kind", BUILTIN_KINDS)
@settings(max_examples=25, deadline=None)
@given(updates=st.lists(step_strategy, max_size=12))
def test_weights_sum_to_one_within_bounds(kind: str, updates: list[dict[str, DomainStats]]) -> None:
    mixture = build_mixture({"kind": kind, "shaping": SHAPING}, domains=DOMAINS)
    for step, stats in enumerate(updates):
        mixture.update(stats, step=step)
        values = np.array(list(mixture.weights().values()))
        assert values.sum() == pytest.approx(1.0, abs=1e-9)
        assert values.min() >= 0.05 - 1e-9
        assert values.max() <= 0.4 + 1e-9


@pytest.mark.parametrize("kind", BUILTIN_KINDS)
def test_same_seed_same_weights_and_counts(kind: str) -> None:
    runs = []
    for _ in range(2):
        mixture = build_mixture({"kind": kind}, domains=DOMAINS)
        _random_updates(mixture, seed=3, steps=20)
        runs.append((mixture.weights(), mixture.batch_counts(100, np.random.default_rng(7))))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("kind", BUILTIN_KINDS)
def test_state_dict_round_trip_continues_identically(kind: str) -> None:
    original = build_mixture({"kind": kind, "shaping": SHAPING}, domains=DOMAINS)
    _random_updates(original, seed=1, steps=15)
    state = json.loads(json.dumps(original.state_dict()))
    restored = build_mixture({"kind": kind, "shaping": SHAPING}, domains=DOMAINS)
    restored.load_state_dict(state)
    _random_updates(original, seed=2, steps=10)
    _random_updates(restored, seed=2, steps=10)
    assert restored.weights() == original.weights()


def test_load_state_dict_rejects_other_domains() -> None:
    state = build_mixture({"kind": "default"}, domains=DOMAINS).state_dict()
    other = build_mixture({"kind": "default"}, domains=DOMAINS[:3])
    with pytest.raises(ValueError):
        other.load_state_dict(state)


@pytest.mark.parametrize("batch_size", [0, 1, 7, 256])
def test_batch_counts_sum_to_batch_size(batch_size: int) -> None:
    mixture = build_mixture({"kind": "static", "ratios": {"d0": 5.0, "d1": 0.1}}, domains=DOMAINS)
    counts = mixture.batch_counts(batch_size, np.random.default_rng(0))
    assert sum(counts.values()) == batch_size


def test_batch_counts_are_unbiased() -> None:
    # Weights 3/8, 1/8 x5 with batch 10: expected counts 3.75 and 1.25; the mean over many draws matches.
    mixture = build_mixture({"kind": "static", "ratios": {"d0": 3.0}}, domains=DOMAINS)
    rng = np.random.default_rng(0)
    draws = np.array([list(mixture.batch_counts(10, rng).values()) for _ in range(4000)])
    assert draws.mean(axis=0) == pytest.approx([3.75] + [1.25] * 5, abs=0.05)


def test_update_rejects_unknown_domain() -> None:
    mixture = build_mixture({"kind": "uniform"}, domains=DOMAINS)
    with pytest.raises(KeyError):
        mixture.update({"nope": DomainStats(n=1, mean_reward=0.0, pass_rate=0.0)}, step=0)
