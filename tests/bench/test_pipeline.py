"""The pipeline benchmark's rate arithmetic, and (slow) a quick run of both sides end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.pipeline import main, rate_from_step_times


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
