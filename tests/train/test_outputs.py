"""The run summary: base and trained evaluations paired on the same tasks, intervals and verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.eval.evaluate import DomainEval
from posttrain.eval.stats import bootstrap_ci
from posttrain.train.config import TrainConfig
from posttrain.train.outputs import Outputs


def _eval(domain: str, rewards: dict[str, float]) -> DomainEval:
    values = tuple(rewards.values())
    low, high = bootstrap_ci(values)
    return DomainEval(domain, len(values), sum(values) / len(values), sum(values) / len(values), 0, 1.0,
                      ci_low=low, ci_high=high, task_ids=tuple(rewards), rewards=values)


def test_summary_pairs_tasks_by_id_and_calls_verdicts(tmp_path: Path) -> None:
    up, flat = "math/x/up", "math/x/flat"
    outputs = Outputs(tmp_path, TrainConfig(seed=7), [up, flat])
    base = {up: _eval(up, {f"t{i}": 0.0 for i in range(40)}),
            flat: _eval(flat, {f"t{i}": float(i % 2) for i in range(40)})}
    final = {up: _eval(up, {f"t{i}": 1.0 for i in range(1, 40)}),  # t0 was an infra failure this time
             flat: _eval(flat, {f"t{i}": float(i % 2) for i in range(40)})}
    summary = outputs.write_summary(base, final, steps=3)
    outputs.close()
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert summary["seed"] == 7
    assert summary["domains"][up]["num_paired"] == 39  # only tasks graded both times are compared
    assert summary["domains"][up]["verdict"] == "improved"
    assert summary["domains"][up]["delta_ci"] == [1.0, 1.0]
    assert summary["domains"][flat]["verdict"] == "no significant change"
    assert summary["domains"][flat]["p_value"] == 1.0
    assert summary["domains_improved_significantly"] == 1 and summary["domains_regressed_significantly"] == 0
    assert summary["mean_delta"]["delta"] == 0.5 and summary["domains"][up]["base"]["n"] == 40


def test_eval_round_trips_through_json() -> None:
    result = _eval("a/b/c", {"t0": 1.0, "t1": 0.0})
    assert DomainEval.from_dict(json.loads(json.dumps(result.to_dict()))) == result
