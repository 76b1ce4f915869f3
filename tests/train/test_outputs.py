"""The run summary: base and trained evaluations paired on the same tasks, intervals and verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

from posttrain.eval.evaluate import DomainEval
from posttrain.eval.stats import bootstrap_ci
from posttrain.train.config import TrainConfig
from posttrain.train.outputs import Outputs, headline


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
    # every resampled mean delta is 0.5, so the bootstrap p-value sits at its floor (1/2000)
    assert summary["headline"] == (
        "1/2 trained domains improved significantly, 0 regressed; mean +50.0 pts [+50.0, +50.0] (p<0.001)"
    )


def _summary(verdicts: list[str], delta: float, ci: tuple[float, float], p_value: float) -> dict[str, object]:
    return {
        "num_domains": len(verdicts),
        "domains_improved_significantly": verdicts.count("improved"),
        "domains_regressed_significantly": verdicts.count("regressed"),
        "mean_delta": {"delta": delta, "ci_low": ci[0], "ci_high": ci[1], "p_value": p_value},
    }


def test_headline_counts_verdicts_and_states_the_mean_with_its_interval() -> None:
    verdicts = ["improved"] * 9 + ["no significant change"] * 2 + ["regressed"]
    assert headline(_summary(verdicts, 0.142, (0.110, 0.1749), 0.001)) == (
        "9/12 trained domains improved significantly, 1 regressed; mean +14.2 pts [+11.0, +17.5] (p=0.001)"
    )
    assert headline(_summary(["regressed", "no significant change"], -0.182, (-0.212, -0.15), 0.0005)) == (
        "0/2 trained domains improved significantly, 1 regressed; mean -18.2 pts [-21.2, -15.0] (p<0.001)"
    )
    assert headline(_summary(["no significant change"], math.nan, (math.nan, math.nan), math.nan)) == (
        "0/1 trained domains improved significantly, 0 regressed; mean n/a (no eval task graded both times)"
    )


def test_untrained_domains_are_reported_apart_and_a_real_drop_is_flagged(tmp_path: Path) -> None:
    trained, dropped, noisy = "math/x/trained", "math/x/dropped", "math/x/noisy"
    outputs = Outputs(tmp_path, TrainConfig(), [trained, dropped, noisy], untrained_ids=[dropped, noisy])
    tasks = [f"t{i}" for i in range(60)]
    base = {trained: _eval(trained, dict.fromkeys(tasks, 0.0)),
            dropped: _eval(dropped, dict.fromkeys(tasks, 1.0)),
            noisy: _eval(noisy, {t: float(i % 2) for i, t in enumerate(tasks)})}
    final = {trained: _eval(trained, dict.fromkeys(tasks, 1.0)),
             # 30 of 60 tasks lost: -50 pts, interval far below zero
             dropped: _eval(dropped, {t: float(i % 2) for i, t in enumerate(tasks)}),
             # one task lost and one gained elsewhere would be 0; here one lost: -1.7 pts, not beyond 2
             noisy: _eval(noisy, {t: 0.0 if i == 1 else float(i % 2) for i, t in enumerate(tasks)})}
    summary = outputs.write_summary(base, final, steps=1)
    outputs.close()
    # the headline numbers are the trained domains' only
    assert summary["num_domains"] == 1 and summary["mean_delta"]["delta"] == 1.0
    assert [d["trained"] for d in summary["domains"].values()] == [True, False, False]
    assert summary["domains"][dropped]["dropped"] and not summary["domains"][noisy]["dropped"]
    assert summary["untrained"]["dropped"] == [dropped] and summary["untrained"]["num_domains"] == 2
    assert summary["headline"].endswith("2 untrained domains: mean -25.8 pts [-32.5, -19.2] (p<0.001), "
                                        "1 dropped by more than 2 pts")


def test_eval_round_trips_through_json() -> None:
    result = _eval("a/b/c", {"t0": 1.0, "t1": 0.0})
    assert DomainEval.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_rewind_keeps_rows_up_to_the_step_and_drops_a_torn_line(tmp_path: Path) -> None:
    outputs = Outputs(tmp_path, TrainConfig(), ["math/x/a"])
    path = tmp_path / "metrics.jsonl"
    rows = [json.dumps({"step": s, "loss": s / 10}) for s in (1, 2, 3, 4)]
    path.write_text("\n".join(rows) + '\n{"step": 5, "lo')  # killed in the middle of writing step 5
    outputs.rewind(2)  # resumed from the checkpoint after step 2: steps 3 and 4 are redone
    outputs.log_step(2, {"loss": 0.7}, {}, {}, {}, 0)  # step index 2 is row 3
    outputs.close()
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines()]
    assert steps == [1, 2, 3]
    assert json.loads(path.read_text().splitlines()[-1])["loss"] == 0.7
