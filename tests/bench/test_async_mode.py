"""The async benchmark's report, on hand-made run folders (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench import async_mode


def write_run(run_dir: Path, rewards: list[float], samples_per_s: float, is_async: bool) -> None:
    run_dir.mkdir(parents=True)
    rows = []
    for i, reward in enumerate(rewards):
        row = {"step": i + 1, "reward": reward, "train_s": 2.0 * (i + 1), "samples_per_s": samples_per_s,
               "sync/weights_s": 0.01}
        if is_async:
            row.update({"async/overlap_s": 0.5, "async/staleness_mean": float(i > 0), "async/dropped_stale": 0.0})
        rows.append(json.dumps(row))
    (run_dir / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    (run_dir / "summary.json").write_text(json.dumps({"mean_final_reward": 0.4 + 0.1 * is_async}))


def test_report_has_the_ratio_against_sync_and_paired_curve_deltas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake_run(config: str, run_dir: Path, overrides: list[str]) -> float:
        seed = int(next(o for o in overrides if o.startswith("seed=")).split("=")[1])
        is_async = "dist.mode=async" in overrides
        assert "steps=3" in overrides and "eval.tasks_per_domain=16" in overrides
        # sync: 100 samples/s and rewards .1 .2 .3; async: 150 samples/s and .05 lower on seed 1 only
        offset = -0.05 if is_async and seed == 1 else 0.0
        write_run(run_dir, [0.1 + offset, 0.2 + offset, 0.3 + offset], 150.0 if is_async else 100.0, is_async)
        return 1.0

    monkeypatch.setattr(async_mode, "run_training", fake_run)
    assert async_mode.main(["--steps", "3", "--seeds", "0,1", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads((tmp_path / "async.json").read_text())
    comparison = report["comparison"]
    assert comparison["num_seeds"] == 2
    assert comparison["samples_per_s_ratio"] == pytest.approx(1.5)
    assert comparison["mean_reward_delta_per_seed"] == pytest.approx({"0": 0.0, "1": -0.05})
    assert comparison["mean_reward_delta"] == pytest.approx(-0.025)
    assert comparison["mean_reward_curves"]["async"] == pytest.approx([0.075, 0.175, 0.275])
    assert comparison["final_eval_delta"] == pytest.approx(0.1)
    run = report["runs"]["async"]["1"]
    assert run["overlap_s"] == pytest.approx(1.5) and run["staleness_mean"] == pytest.approx(2 / 3)
    assert "overlap_s" not in report["runs"]["sync"]["0"]
