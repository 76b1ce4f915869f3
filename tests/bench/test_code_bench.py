"""The code verification benchmark: one problem end to end, both graders, the JSON it writes."""

from __future__ import annotations

import json
from pathlib import Path

from posttrain.bench.code import BENCH_HACKS, main
from tests.verify.code_fixtures import requires_bwrap


@requires_bwrap
def test_one_problem_writes_rates_and_who_was_fooled(tmp_path: Path) -> None:
    assert main(["--problems", "1", "--rounds", "1", "--workers", "2", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "code.json").read_text())
    assert report["workload"]["responses"] == 8
    assert report["ours"]["responses_per_s"] > 0 and report["naive"]["responses_per_s"] > 0
    assert report["fooled"]["ours"] == [] and report["ours"]["infra_scores"] == 0
    assert report["fooled"]["naive"] == list(BENCH_HACKS)  # every bench hack fools an exit-status grader
    assert report["pass_rate"]["canonical"] == {"ours": 1.0, "naive": 1.0}
