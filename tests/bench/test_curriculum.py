"""Simulator behaviour and a tiny benchmark run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posttrain.bench.curriculum import main, t_quantile_975
from posttrain.bench.curriculum_episode import run_episode
from posttrain.bench.curriculum_sim import KIND_GUESSABLE, KIND_HOPELESS, Simulator, load_sim_config


@pytest.fixture(scope="module")
def sim_a():  # type: ignore[no-untyped-def]
    return load_sim_config("a")


def test_committed_worlds_differ_and_have_50_plus_domains() -> None:
    a, b = load_sim_config("a"), load_sim_config("b")
    assert a.num_domains >= 50 and b.num_domains >= 50 and a != b


def test_same_seed_same_world_and_stats(sim_a) -> None:  # type: ignore[no-untyped-def]
    counts = np.full(sim_a.num_domains, 4)
    first, second = Simulator(sim_a, 5), Simulator(sim_a, 5)
    assert first.step(counts) == second.step(counts)


def test_unlearnable_domains_never_improve(sim_a) -> None:  # type: ignore[no-untyped-def]
    sim = Simulator(sim_a, 0)
    stuck = np.isin(sim.world.kind, [KIND_HOPELESS, KIND_GUESSABLE])
    before = sim.true_pass_rates()
    for _ in range(50):
        sim.step(np.full(sim_a.num_domains, 8))
    assert sim.true_pass_rates()[stuck] == pytest.approx(before[stuck])


def test_sampled_domain_learns_and_unsampled_forgets(sim_a) -> None:  # type: ignore[no-untyped-def]
    sim = Simulator(sim_a, 0)
    learnable = np.flatnonzero(sim.world.learnable)
    first, second = learnable[0], learnable[1]
    counts = np.zeros(sim_a.num_domains, dtype=np.int64)
    counts[[first, second]] = 64
    for _ in range(40):
        sim.step(counts)
    peak = sim.true_pass_rates()
    counts[second] = 0
    for _ in range(40):
        sim.step(counts)
    after = sim.true_pass_rates()
    assert after[first] >= peak[first] - 1e-9 and after[second] < peak[second]


def test_default_beats_uniform_on_a_short_run(sim_a) -> None:  # type: ignore[no-untyped-def]
    # 150 steps, one seed: the default's mean learnable pass rate is higher than uniform's.
    uniform = run_episode(sim_a, {"kind": "uniform"}, seed=0, num_steps=150)
    default = run_episode(sim_a, {"kind": "default"}, seed=0, num_steps=150)
    assert default.metrics["auc_mean_pass"] > uniform.metrics["auc_mean_pass"]


def test_t_quantile_matches_table() -> None:
    # Student t, 97.5%: dof 19 -> 2.093, dof 9 -> 2.262.
    assert t_quantile_975(19) == pytest.approx(2.093, abs=2e-3)
    assert t_quantile_975(9) == pytest.approx(2.262, abs=5e-3)


def test_bench_main_writes_json(tmp_path: Path) -> None:
    code = main(["--seeds", "2", "--steps", "20", "--worlds", "a", "--mixtures", "uniform",
                 "target_multiplicative", "default", "--workers", "1", "--no-plots", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "curriculum.json").read_text())
    assert code == 0 and set(report["worlds"]["a"]["mixtures"]) == {"uniform", "target_multiplicative", "default"}


@pytest.mark.slow
def test_bench_main_writes_plots(tmp_path: Path) -> None:
    main(["--seeds", "2", "--steps", "30", "--worlds", "a", "b", "--workers", "1", "--out", str(tmp_path)])
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "curriculum_curves_a.png", "curriculum_curves_b.png",
        "curriculum_weights_a.png", "curriculum_weights_b.png"]
