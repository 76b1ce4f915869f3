"""The gamedev grading benchmark: one task per domain end to end, the JSON it writes, its checks met."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.bench.gamedev import main
from tests.verify.code_fixtures import requires_bwrap


@requires_bwrap
@pytest.mark.slow
def test_one_task_per_domain_end_to_end(tmp_path: Path) -> None:
    assert main(["--tasks", "1", "--rounds", "1", "--workers", "2", "--out", str(tmp_path), "--json"]) == 0
    report = json.loads((tmp_path / "gamedev.json").read_text())
    assert report["workload"]["responses"] == {"baseline": 45, "play": 45, "level": 18}
    assert report["pass_rate"]["play"] == {"gold": 1.0, "identity": 0.0, "garbage": 0.0}
    assert set(report["ms_per_response"]) == {"baseline", "play", "level", "play_grid", "play_motion", "play_launch"}
    assert all(report["checks"].values())
