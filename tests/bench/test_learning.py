"""The learning benchmark's acceptance checks and report, on hand-made run summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from posttrain.bench import learning


def _domain(delta: float, verdict: str, trained: bool = True) -> dict[str, Any]:
    side = {"reward": 0.3, "pass_rate": 0.3, "ci_low": 0.25, "ci_high": 0.35, "n": 256}
    return {"trained": trained, "base": side, "final": side, "delta_reward": delta,
            "delta_ci": [delta - 0.05, delta + 0.05], "p_value": 0.01, "verdict": verdict}


def _summary(deltas: list[tuple[float, str]], mean: float, ci: tuple[float, float], seed: int = 0) -> dict[str, Any]:
    domains = {f"a/b/d{i}": _domain(d, v) for i, (d, v) in enumerate(deltas)}
    domains["a/b/untrained"] = _domain(-0.2, "regressed", trained=False)  # never counts against the run
    return {"seed": seed, "steps": 10, "headline": "h", "domains": domains,
            "mean_delta": {"delta": mean, "ci_low": ci[0], "ci_high": ci[1], "p_value": 0.001}}


def test_a_run_that_learns_passes_every_check() -> None:
    deltas = [(0.15, "improved"), (0.12, "improved"), (0.02, "no significant change"), (0.11, "improved")]
    assert learning.seed_checks(_summary(deltas, 0.10, (0.07, 0.13))) == {
        "improved_fraction": True, "significant": True, "mean_gain": True, "no_regression": True}


def test_each_check_fails_on_its_own() -> None:
    # 2 of 4 improved (< 75%), 1 of 4 significant (< half), mean +9.9 (< +10), one significant regression
    deltas = [(0.3, "improved"), (0.01, "no significant change"), (-0.01, "no significant change"),
              (-0.2, "regressed")]
    assert learning.seed_checks(_summary(deltas, 0.099, (0.05, 0.15))) == {
        "improved_fraction": False, "significant": False, "mean_gain": False, "no_regression": False}


@pytest.mark.parametrize(("mean", "ci", "flat"), [
    (0.015, (0.01, 0.02), True),     # inside +-2 points
    (-0.05, (-0.09, 0.01), True),    # interval contains 0
    (-0.18, (-0.21, -0.15), False),  # a real drop is not "flat" either
    (0.04, (0.01, 0.07), False),
])
def test_control_is_flat_only_within_the_band_or_its_interval(mean: float, ci: tuple[float, float],
                                                               flat: bool) -> None:
    assert learning.control_check(_summary([(0.0, "no significant change")], mean, ci)) is flat


def test_report_holds_every_run_and_its_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    good = [(0.15, "improved")] * 4

    def fake_run(config: str, run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], float]:
        calls.append(overrides)
        if "reward.mode=random" in overrides:
            return _summary([(0.0, "no significant change")], 0.005, (-0.01, 0.02)), 1.0
        return _summary(good, 0.15, (0.1, 0.2), seed=int(overrides[-1].split("=")[1])), 2.0

    monkeypatch.setattr(learning, "run_training", fake_run)
    assert learning.main(["--seeds", "0,1", "--set", "steps=5", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads((tmp_path / "learning.json").read_text())
    assert calls == [["steps=5", "seed=0"], ["steps=5", "seed=1"], ["steps=5", "seed=0", "reward.mode=random"]]
    assert list(report["seeds"]) == ["0", "1"] and report["seeds"]["1"]["seed"] == 1
    assert report["seeds"]["0"]["domains"]["a/b/untrained"]["trained"] is False
    assert report["checks"]["control_flat"] is True and report["passed"] is True


def test_parallel_runs_give_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(config: str, run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], float]:
        if "reward.mode=random" in overrides:
            return _summary([(0.0, "no significant change")], 0.005, (-0.01, 0.02)), 1.0
        seed = int(overrides[-1].split("=")[1])
        return _summary([(0.15 + seed / 100, "improved")] * 4, 0.15, (0.1, 0.2), seed=seed), 2.0

    monkeypatch.setattr(learning, "run_training", fake_run)
    reports = []
    for jobs in ("1", "3"):
        out = tmp_path / jobs
        assert learning.main(["--seeds", "0,1,2", "--jobs", jobs, "--out", str(out), "--json"]) == 0
        report = json.loads((out / "learning.json").read_text())
        reports.append({k: report[k] for k in ("seeds", "control", "checks", "passed")})
    assert reports[0] == reports[1] and list(reports[1]["seeds"]) == ["0", "1", "2"]


def test_agent_runs_report_pooled_success_and_recovery_with_wilson_intervals(tmp_path: Path) -> None:
    import json

    from posttrain.bench.learning import agent_report, wilson

    low, high = wilson(30, 100)
    assert low < 0.3 < high and wilson(0, 0) == (0.0, 0.0)
    def doc(success: float, recovery: float) -> dict[str, Any]:
        agent = {"episodes": 200, "success_rate": success, "errored_episodes": 80, "recovery_rate": recovery}
        return {"agent/tools/kv@easy": {"agent": agent}, "agent/tools/kv@medium": {"agent": agent}}

    (tmp_path / "eval_base.json").write_text(json.dumps(doc(0.3, 0.2)))
    (tmp_path / "eval_final.json").write_text(json.dumps(doc(0.6, 0.5)))
    summary = {"domains": {"agent/tools/kv@easy": {"trained": True}, "agent/tools/kv@medium": {"trained": True}}}
    report = agent_report(tmp_path, summary)
    assert report is not None and report["success_separated"] and report["recovery_separated"]
    assert report["final"]["episodes"] == 400 and report["final"]["recovery_rate"] == 0.5
    change, low, high = report["success_delta"]
    assert change == pytest.approx(0.3) and 0.0 < low < 0.3 < high
    (tmp_path / "eval_final.json").write_text(json.dumps(doc(0.33, 0.22)))
    report = agent_report(tmp_path, summary)
    assert report is not None and not report["success_separated"] and not report["recovery_separated"]
    assert report["success_delta"][1] < 0.0 < report["success_delta"][2]


def test_agent_success_is_also_paired_on_the_same_tasks() -> None:
    from posttrain.bench.learning import paired_success

    ids = [f"t{i}" for i in range(100)]
    agent = {"episodes": 100}

    def doc(passed: set[int], partial: set[int] | None = None) -> dict[str, Any]:
        rewards = [1.0 if i in passed else 0.5 if i in (partial or set()) else 0.0 for i in range(100)]
        return {"agent/tools/kv@easy": {"agent": agent, "task_ids": ids, "rewards": rewards}}

    base = doc(set(range(30)), partial=set(range(30, 60)))  # partial completion is not success
    up = paired_success(base, doc(set(range(2, 47))), ["agent/tools/kv@easy"])
    assert (up["tasks"], up["gained"], up["lost"]) == (100, 17, 2)
    assert up["delta"] == pytest.approx(0.15) and 0.0 < up["ci"][0] < 0.15 < up["ci"][1] and up["p_value"] < 0.01
    flat = paired_success(base, doc(set(range(5, 35))), ["agent/tools/kv@easy"])  # 5 gained, 5 lost
    assert flat["delta"] == 0.0 and flat["ci"][0] < 0.0 < flat["ci"][1]


def test_newcombe_difference_interval_matches_the_published_example() -> None:
    from posttrain.bench.learning import newcombe, wilson

    # Newcombe (1998), Statistics in Medicine 17:873, Table II example (a): 56/70 vs 48/80, method 10
    low, high = newcombe(48 / 80, wilson(48, 80), 56 / 70, wilson(56, 70))
    assert (low, high) == pytest.approx((0.0524, 0.3339), abs=1e-4)


def _change(delta: float, low: float, high: float) -> dict[str, Any]:
    return {"delta": delta, "ci_low": low, "ci_high": high, "p_value": 0.01, "n": 192}


def test_sampled_matrix_changes_become_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"changes": {"base": "base", "classes": [
        {"checkpoint": "seed0", "class": "agent", "domains": [],
         "metrics": {"pass@1_sampled": _change(0.05, 0.02, 0.08), "recovery_sampled": _change(0.04, 0.01, 0.07),
                     "completion": _change(0.0, -0.1, 0.1)}},
        {"checkpoint": "seed1", "class": "agent", "domains": [],
         "metrics": {"pass@1_sampled": _change(0.03, 0.01, 0.05), "recovery_sampled": _change(0.02, -0.01, 0.05)}},
        {"checkpoint": "control", "class": "agent", "domains": [],
         "metrics": {"pass@1_sampled": _change(-0.01, -0.03, 0.01)}},
    ]}}  # fmt: skip
    changes = learning.changes_by_run(doc)
    assert set(changes["seed0"]["agent"]) == {"pass@1_sampled", "recovery_sampled"}  # other metrics dropped
    assert learning.sampled_checks(changes["seed0"]) == {"sampled_pass_up": True, "sampled_recovery_up": True}
    assert learning.sampled_checks(changes["seed1"]) == {"sampled_pass_up": True, "sampled_recovery_up": False}
    assert learning.sampled_checks(changes["control"]) == {"sampled_pass_up": False}
    assert learning.control_sampled_flat(changes["control"])
    assert not learning.control_sampled_flat({"agent": {"pass@1_sampled": _change(0.05, 0.03, 0.07)}})

    def fake_run(config: str, run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], float]:
        if "reward.mode=random" in overrides:
            return _summary([(0.0, "no significant change")], 0.005, (-0.01, 0.02)), 1.0
        return _summary([(0.15, "improved")] * 4, 0.15, (0.1, 0.2), seed=int(overrides[-1].split("=")[1])), 2.0

    asked: list[tuple[dict[str, Path], int, int]] = []

    def fake_matrix(config: str, runs: dict[str, Path], out: Path, samples: int, tasks: int) -> dict[str, Any]:
        asked.append((runs, samples, tasks))
        return {"command": "posttrain eval", "changes": changes}

    monkeypatch.setattr(learning, "run_training", fake_run)
    monkeypatch.setattr(learning, "sampled_matrix", fake_matrix)
    argv = ["--seeds", "0,1", "--sampled", "8", "--sampled-tasks", "100", "--out", str(tmp_path), "--json"]
    assert learning.main(argv) == 0
    report = json.loads((tmp_path / "learning.json").read_text())
    assert [sorted(r) for r, _, _ in asked] == [["control", "seed0", "seed1"]] and asked[0][1:] == (8, 100)
    assert report["checks"]["seed1"]["sampled_recovery_up"] is False and report["passed"] is False
    assert report["checks"]["control_sampled_flat"] is True


def _eval_doc(rewards: dict[str, list[float]]) -> dict[str, Any]:
    return {domain: {"task_ids": [f"{domain}#{i}" for i in range(len(r))], "rewards": r}
            for domain, r in rewards.items()}


def _runs_with_finals(finals: dict[str, dict[str, list[float]]]) -> Any:
    """A stand-in for `run_training` whose runs (seedN, control) write these final per-task rewards."""
    def fake_run(config: str, run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], float]:
        run_dir.mkdir(parents=True)
        (run_dir / "eval_final.json").write_text(json.dumps(_eval_doc(finals[run_dir.name])))
        if "reward.mode=random" in overrides:
            return _summary([(0.0, "no significant change")] * 2, 0.005, (-0.01, 0.02)), 1.0
        return _summary([(0.15, "improved")] * 2, 0.15, (0.1, 0.2)), 1.0

    return fake_run


def test_a_seed_is_compared_with_the_control_on_the_same_tasks(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`vs_control` pairs each seed's final held-out rewards with the control's on the same tasks;
    `beats_control` holds only when that interval is above 0 (a seed that gained no more than the
    control fails it even though its own change against the base is large)."""
    finals = {"seed0": {"a/b/d0": [1.0] * 30 + [0.0] * 10, "a/b/d1": [1.0] * 28 + [0.0] * 12},
              "seed1": {"a/b/d0": [1.0] * 12 + [0.0] * 28, "a/b/d1": [1.0] * 10 + [0.0] * 30},
              "control": {"a/b/d0": [1.0] * 10 + [0.0] * 30, "a/b/d1": [1.0] * 10 + [0.0] * 30}}

    monkeypatch.setattr(learning, "run_training", _runs_with_finals(finals))
    assert learning.main(["--seeds", "0,1", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads((tmp_path / "learning.json").read_text())
    ahead, level = report["seeds"]["0"]["vs_control"], report["seeds"]["1"]["vs_control"]
    assert ahead["tasks"] == 80 and ahead["delta"] == pytest.approx((20 / 40 + 18 / 40) / 2)
    assert ahead["ci"][0] > 0 and report["checks"]["seed0"]["beats_control"] is True
    assert level["delta"] == pytest.approx(1 / 40) and report["checks"]["seed1"]["beats_control"] is False
    assert report["passed"] is False


def test_seeds_pooled_against_the_control_average_each_task_over_the_seeds(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`seeds_vs_control` pairs each task's final reward averaged over the seeds with the control's:
    two seeds that each pass different tasks pool to half a point per task; `seeds_beat_control` holds
    when that interval is above 0 and fails when the seeds do no better than the control on average."""
    def run_with(finals: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
        monkeypatch.setattr(learning, "run_training", _runs_with_finals(finals))
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        assert learning.main(["--seeds", "0,1", "--out", str(out), "--json"]) == 0
        return json.loads((out / "learning.json").read_text())

    ahead = run_with({"seed0": {"a/b/d0": [1.0] * 20 + [0.0] * 20, "a/b/d1": [1.0] * 20 + [0.0] * 20},
                      "seed1": {"a/b/d0": [0.0] * 20 + [1.0] * 20, "a/b/d1": [0.0] * 20 + [1.0] * 20},
                      "control": {"a/b/d0": [0.0] * 40, "a/b/d1": [0.0] * 40}})
    assert ahead["seeds_vs_control"]["tasks"] == 80 and ahead["seeds_vs_control"]["delta"] == pytest.approx(0.5)
    assert ahead["checks"]["seeds_beat_control"] is True
    level = run_with({"seed0": {"a/b/d0": [1.0] * 20 + [0.0] * 20, "a/b/d1": [1.0] * 20 + [0.0] * 20},
                      "seed1": {"a/b/d0": [0.0] * 40, "a/b/d1": [0.0] * 40},
                      "control": {"a/b/d0": [1.0] * 10 + [0.0] * 30, "a/b/d1": [0.0] * 20 + [1.0] * 10 + [0.0] * 10}})
    assert level["seeds_vs_control"]["delta"] == pytest.approx(0.0)
    assert level["checks"]["seeds_beat_control"] is False and level["passed"] is False
