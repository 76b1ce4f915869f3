"""The cad grading benchmark: one family end to end, both sides, the JSON it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.cad import main
from tests.verify.cad_fixtures import requires_openscad

pytest.importorskip("trimesh")


@requires_openscad
def test_one_family_writes_stage_timings_and_rates(tmp_path: Path) -> None:
    argv = ["--tasks", "1", "--families", "primitive", "--workers", "2", "--sequential", "2", "--rounds", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "cad.json").read_text())
    assert report["workload"]["responses"] == 6 and len(report["workload"]["domains"]) == 3
    assert set(report["sequential_ms"]) == {"openscad_direct", "openscad_sandboxed", "load_solid", "compare"}
    assert all(ms > 0 for ms in report["sequential_ms"].values())
    assert report["batch"]["ours_responses_per_s"] > 0 and report["batch"]["direct_responses_per_s"] > 0
    assert report["pass_rate"]["reference"] == 1.0 and report["infra_scores"] == 0
    assert report["direct_runs_without_stl"] == 0
