"""The rollout benchmark's target checklist, and (slow) one real workload end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.rollout import main, targets


def test_targets_read_ratios_and_leave_unmeasured_ones_open() -> None:
    verdicts = targets({"W1": {"speedup_vs_B0": 5.0, "speedup_vs_B1": 1.2, "max_waste_slots": 3}})
    assert verdicts["W1 >= 4x B0"]["met"] is True
    assert verdicts["W1 >= 1.5x B1"]["met"] is False
    assert verdicts["W2 >= 3x B0"]["met"] is None


@pytest.mark.slow
def test_quick_w3_run_writes_json(tmp_path: Path) -> None:
    assert main(["--quick", "--workloads", "W3", "--threads", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "rollout.json").read_text())
    assert report["sizes"]["w3_shared_tokens"] == 512
    assert report["targets"]["small"]["W3 recomputed == unique"]["met"] is True


def test_projection_benchmark_reports_both_forms_per_row_count(tmp_path: Path) -> None:
    assert main(["--quick", "--workloads", "proj", "--threads", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "rollout.json").read_text())["results"]["small"]["proj"]
    assert set(result) == {f"rows_{n}" for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)}
    for cell in result.values():
        assert cell["linear_ms"] > 0 and cell["project_ms"] > 0
        assert cell["speedup"] == pytest.approx(cell["linear_ms"] / cell["project_ms"])
