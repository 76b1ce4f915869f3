"""`bench/update.py` runs end to end at a toy size and writes its report (figures are not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.bench.update import main, workload


def test_workload_repeats_each_document_across_its_questions_and_group() -> None:
    batch = workload(prompt_tokens=50, documents=2, questions=3, group=2)
    assert len(batch) == 12
    assert len({tuple(p[:50]) for p in batch.prompt_ids}) == 2
    assert len({tuple(p) for p in batch.prompt_ids}) == 6


def test_update_bench_writes_medians_and_speedups(tmp_path: Path) -> None:
    argv = ["--out", str(tmp_path), "--prompt-tokens", "300", "--questions", "2", "--rounds", "1"]
    assert main(argv) == 0
    report = json.loads((tmp_path / "update.json").read_text())
    assert set(report["p50_s"]) == {"padded", "shared", "repeated", "ungrouped"}
    assert report["cascade_speedup_step"] > 0 and report["group_speedup_step"] > 0
    assert report["workload"]["rows"] == 8 and report["speedup_step"] > 0
