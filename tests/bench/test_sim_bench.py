"""The simulator benchmarks: the calibration's fits, the local scenarios it builds, the cluster sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posttrain.bench.sim_calibrate import Calibration, nonnegative_lstsq, padded_rows
from posttrain.bench.sim_cluster import cluster_scenario, variant
from posttrain.bench.sim_validate import VALIDATION, SimBenchSettings, local_scenario
from posttrain.sched.sim import simulate
from posttrain.sched.sim_model import EmpiricalTime, LearnerModel, RolloutPool


def test_nonnegative_least_squares_recovers_and_clamps() -> None:
    columns = np.asarray([[1.0, 2.0, 0.0], [1.0, 5.0, 1.0], [1.0, 9.0, 4.0], [1.0, 3.0, 7.0]])
    truth = np.asarray([0.5, 0.25, 2.0])
    assert nonnegative_lstsq(columns, columns @ truth) == pytest.approx(truth)
    # A target that falls with the second column: the unconstrained slope is negative, the fit sets it to 0.
    falling = np.asarray([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    fit = nonnegative_lstsq(falling, np.asarray([3.0, 2.0, 1.0]))
    assert fit[1] == 0.0 and fit[0] == pytest.approx(2.0)
    # A constant fitted to 1 and 3: the plain mean 2; on relative errors, minimising (c - 1)^2 + ((c - 3) / 3)^2
    # gives c = 1.2.
    ones = np.ones((2, 1))
    assert nonnegative_lstsq(ones, np.asarray([1.0, 3.0]))[0] == pytest.approx(2.0)
    assert nonnegative_lstsq(ones, np.asarray([1.0, 3.0]), relative=True)[0] == pytest.approx(1.2)


def test_padded_rows_are_as_long_as_their_micro_batchs_longest() -> None:
    assert padded_rows([3, 5, 2, 7, 1], 2) == [5, 5, 7, 7, 1]
    assert padded_rows([3, 5], 64) == [5, 5]


def fake_calibration() -> Calibration:
    return Calibration(
        rollout=RolloutPool(decode_step_s=0.01, token_s=0.001), learner=LearnerModel(step_s=0.1, token_s=1e-4),
        verify_call_s=0.02, verify_item_s={"math": 1e-4, "code": 0.02},
        verify_shape={"math": EmpiricalTime(samples_s=(1e-4,)), "code": EmpiricalTime(samples_s=(0.01, 0.03))},
        serial_s={"math": [1e-4], "code": [0.05]}, sync_s=0.003, prompt_tokens={"math": 15.0, "code": 85.0},
        prompt_sigma={"math": 0.0, "code": 0.0},
        response_fraction={"math": 0.5, "code": 1.0},
    )  # fmt: skip


def test_local_scenarios_take_every_coefficient_from_the_calibration() -> None:
    settings = SimBenchSettings()
    calibration = fake_calibration()
    by_name = {c.name: local_scenario(calibration, c, settings) for c in VALIDATION}
    mixed = by_name["mixed"]
    assert [(d.name, d.num_domains, d.prompt_tokens) for d in mixed.domains] == [("math", 4, 15), ("code", 6, 85)]
    assert mixed.domains[0].response_tokens == 12  # half of the 24-token budget
    assert mixed.rollout == calibration.rollout and mixed.learner == calibration.learner
    assert mixed.verify.num_workers == 1 and mixed.verify.call_s == 0.02 and mixed.sync_s == 0.003
    assert [d.name for d in by_name["arithmetic"].domains] == ["math"]
    producer = by_name["code-async"]
    assert (producer.mode, producer.max_staleness, producer.rollout.grades_own_calls) == ("async", 1, True)
    assert mixed.mode == "sync" and not mixed.rollout.grades_own_calls
    # Step = generate + verify + learn + sync, and a code step's verification is about its items x 0.02 s.
    result = simulate(by_name["code"])
    assert result.step_s == pytest.approx(sum(result.breakdown_s[k] for k in ("generate_s", "verify_s", "learn_s",
                                                                               "sync_s")))  # fmt: skip
    assert result.breakdown_s["verify_s"] == pytest.approx(0.02 + 32 * 0.02, rel=0.2)


def test_cluster_scenario_is_the_one_the_docs_describe() -> None:
    base = cluster_scenario()
    assert base.rollout.num_workers == 64 and base.verify.num_workers == 1000
    assert sum(d.num_domains for d in base.domains) == 300 and base.samples_per_step == 8192
    async_small = variant(base, "async k=2", verify_workers=250, timeout_s=30.0)
    assert (async_small.mode, async_small.max_staleness, async_small.verify.num_workers,
            async_small.verify.timeout_s) == ("async", 2, 250, 30.0)  # fmt: skip
    assert variant(base, "sync", rollout_gpus=16).rollout.num_workers == 16


@pytest.mark.slow
def test_cluster_quick_run_writes_report_and_curves(tmp_path: Path) -> None:
    from posttrain.bench.sim_cluster import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "sim_cluster.json").read_text())
    assert report["measured"] is False and report["assumptions"]
    assert all((tmp_path / name).stat().st_size > 0 for name in report["images"])
    sweep = report["sweeps"]["verify_workers"]
    assert sweep["async k=1"]["1000"]["samples_per_s"] > sweep["sync"]["1000"]["samples_per_s"]


@pytest.mark.slow
def test_validation_quick_run_compares_every_config(tmp_path: Path) -> None:
    from posttrain.bench.sim_validate import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "sim.json").read_text())
    assert set(report["configs"]) == {"arithmetic", "code", "mixed", "code-async"}
    for result in report["configs"].values():
        assert result["measured_samples_per_s"] > 0 and result["predicted_samples_per_s"] > 0
    assert (tmp_path / "sim_validation.png").stat().st_size > 0
