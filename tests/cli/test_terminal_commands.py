"""`posttrain tasks validate` and `posttrain score` on terminal task packages (a domains YAML naming a
package folder relative to itself)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from posttrain.cli import main
from posttrain.verify.tool_calls import format_tool_call

DATA = Path(__file__).parents[1] / "tasks" / "data" / "terminal"


def test_validate_reports_every_package_and_fails_on_a_broken_oracle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(DATA, tmp_path / "set")
    assert main(["tasks", "validate", str(tmp_path / "set"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 3
    (tmp_path / "set" / "shell" / "sum-yaml" / "solution" / "solve.sh").write_text("echo 41 > sum.txt\n")
    assert main(["tasks", "validate", str(tmp_path / "set"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    failed = [p for p in report["packages"] if not p["ok"]]
    assert [Path(p["path"]).name for p in failed] == ["sum-yaml"] and "oracle" in failed[0]["failures"][0]


def test_score_grades_turns_and_a_script_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(DATA, tmp_path / "packages")
    domains = tmp_path / "domains.yaml"
    domains.write_text("domains:\n  - family: {kind: terminal, sources: [{path: packages, name: mine}]}\n")
    task = "terminal/mine/shell@medium#sum-yaml"
    lines = [
        {
            "task_id": task,
            "turns": [format_tool_call("bash", {"command": "paste -sd+ nums.txt | bc > sum.txt"})],
        },
        {"task_id": task, "response": "#!/bin/sh\necho 42 > sum.txt\n"},
        {"task_id": task, "response": "The sum is 42."},
    ]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["score", "--domains", str(domains), "--responses", str(responses), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tasks"]
    assert [row["passed"] for row in rows] == [True, True, False]
    assert [row["end_reason"] for row in rows] == ["policy_out_of_turns", "policy_out_of_turns", "completed"]
