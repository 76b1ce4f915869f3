"""`bench/terminal.py` runs end to end and writes its report (figures are not asserted: timings live in the bench)."""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.bench.terminal import main


def test_terminal_bench_writes_medians_and_ratios(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--rounds", "2"]) == 0
    report = json.loads((tmp_path / "terminal.json").read_text())
    assert set(report["p50_ms"]) == {
        "cold_fork_ms",
        "checkout_ms",
        "command_ms",
        "checkin_ms",
        "warm_fork_ms",
    }
    assert report["rounds"] == 2 and report["warm_fork_vs_command"] > 0
