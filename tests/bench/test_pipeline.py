"""The pipeline benchmark's rate and stage arithmetic, and (slow) a quick run of both sides end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.pipeline import (
    PipelineSettings,
    _domain_sum,
    default_settings,
    main,
    rate_from_step_times,
    side_result,
)
from posttrain.bench.pipeline_trl import StageClock, step_breakdown


def test_rate_skips_the_warmup_step() -> None:
    # Steps end at 10, 11, 13, 14 s; after one warm-up step, 3 steps of 128 samples take 14 - 10 = 4 s.
    rate = rate_from_step_times([10.0, 11.0, 13.0, 14.0], samples_per_step=128, warmup_steps=1)
    assert rate["samples_per_s"] == pytest.approx(3 * 128 / 4.0)
    assert rate["timed_steps"] == 3
    assert rate["median_step_s"] == pytest.approx(1.0)  # step times 1, 2, 1


@pytest.mark.slow
def test_quick_run_reports_both_rates(tmp_path: Path) -> None:
    assert main(["--quick", "--threads", "1", "--json", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "pipeline.json").read_text())
    for key in ("posttrain_samples_per_s", "trl_samples_per_s", "ratio_posttrain_over_trl", "settings",
                "versions", "load_avg_start", "load_avg_end", "rounds", "target"):
        assert key in report
    assert report["posttrain_samples_per_s"] > 0
    assert report["trl_samples_per_s"] > 0
    assert report["ratio_posttrain_over_trl"] == pytest.approx(
        report["posttrain_samples_per_s"] / report["trl_samples_per_s"])
    assert report["settings"]["group_size"] == 8
    assert report["versions"]["trl"]


def test_trl_breakdown_splits_each_step_into_its_stages() -> None:
    clock = StageClock()
    # Three optimiser steps ending at 1, 3 and 6 s; the first is the warm-up.
    laps = [(1.0, 0.5, 0.1, 0.7, 10.0), (3.0, 1.0, 0.2, 1.5, 20.0), (6.0, 1.5, 0.5, 2.5, 40.0)]
    for end_s, generate_s, verify_s, prepare_s, tokens in laps:
        clock.laps.append({"generate": generate_s, "verify": verify_s, "prepare": prepare_s,
                           "completion_tokens": tokens})
        clock.ends_s.append(end_s)
    rows = step_breakdown(clock, warmup_steps=1)
    assert [row["step_s"] for row in rows] == [2.0, 3.0]
    assert rows[0]["learn_s"] == pytest.approx(2.0 - 1.5)  # the step less its batch preparation
    assert rows[1]["other_s"] == pytest.approx(2.5 - 1.5 - 0.5)
    assert [row["completion_tokens"] for row in rows] == [20.0, 40.0]
    assert all(row["sync_s"] == 0.0 for row in rows)


def test_stage_clock_counts_generated_tokens_per_step() -> None:
    clock = StageClock()
    generate = clock.wrap("generate", lambda prompts: ([[1, 2, 3]] * len(prompts), [[4] * n for n in prompts]))
    generate([2, 5])
    clock.lap()
    assert clock.laps[0]["completion_tokens"] == 7
    assert clock.completion_tokens == [2, 5]
    assert clock.prompt_tokens == [3, 3]
    assert clock.busy_s["completion_tokens"] == 0  # reset for the next step


def test_side_result_reports_tokens_per_s_and_median_stages() -> None:
    settings = PipelineSettings(tasks_per_step=2, group_size=2, warmup_steps=1)  # 4 samples per step
    stage = {"generate_s": 1.0, "verify_s": 0.1, "learn_s": 0.5, "sync_s": 0.0, "other_s": 0.4}
    raw = {"ends_s": [1.0, 3.0, 5.0],
           "stages": [stage | {"step_s": 2.0, "completion_tokens": 40.0},
                      stage | {"step_s": 2.0, "completion_tokens": 80.0, "generate_s": 3.0}]}
    result = side_result(settings, raw)
    assert result["samples_per_s"] == pytest.approx(8 / 4.0)
    assert result["completion_tokens_per_s"] == pytest.approx(120 / 4.0)
    assert result["mean_completion_tokens"] == pytest.approx(120 / 8)
    assert result["median_stage_s"]["generate_s"] == pytest.approx(2.0)


def test_posttrain_tokens_weight_each_domain_by_its_samples() -> None:
    row = {"domain/a/response_tokens": 10.0, "domain/a/samples": 3, "domain/b/response_tokens": 20.0,
           "domain/b/samples": 1, "reward": 0.5}
    assert _domain_sum(row, "samples") == 4
    assert _domain_sum(row, "response_tokens", "samples") == pytest.approx(50.0)


def test_smollm2_defaults_share_one_micro_batch_split() -> None:
    settings = default_settings("smollm2", quick=False)
    assert settings.samples_per_step == 32
    assert settings.samples_per_step % settings.micro_batch_size == 0
    assert settings.max_new_tokens == 128
    assert settings.lora_rank == 16
    assert default_settings("tiny", quick=True).steps == 2
