"""The domains/score command line: JSON shapes, exit codes, and hostile input handled without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain.cli import main

DOMAINS_YAML = "domains:\n  - family: {kind: arithmetic, ops: [add], levels: [easy]}\n  - family: {kind: lists, ops: [sort], levels: [easy]}\n"


@pytest.fixture
def domains_file(tmp_path: Path) -> Path:
    path = tmp_path / "domains.yaml"
    path.write_text(DOMAINS_YAML)
    return path


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(args)
    return code, json.loads(capsys.readouterr().out)


def test_list_json_counts_domains(domains_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["domains", "list", "--domains", str(domains_file), "--json"], capsys)
    assert code == 0 and doc["count"] == 2 and doc["classes"] == ["data", "math"]


def test_validate_passes_and_reports_json(domains_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(["domains", "validate", "--all", "--domains", str(domains_file), "--json"], capsys)
    assert code == 0 and doc["failed"] == 0 and doc["passed"] == 2


def test_unknown_domain_is_one_clear_error(domains_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["domains", "show", "math/arithmetic/ad@easy", "--domains", str(domains_file)]) == 2
    err = capsys.readouterr().err
    assert "unknown domain" in err and "math/arithmetic/add@easy" in err and "Traceback" not in err


def test_score_grades_and_reports_bad_lines(
    domains_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from posttrain.tasks.pool import TaskPool
    from posttrain.tasks.registry import DomainRegistry, load_domains

    pool = TaskPool(DomainRegistry.from_config(load_domains(domains_file)))
    task = pool.task("math/arithmetic/add@easy", 5)
    lines = [
        json.dumps({"task_id": task.id, "response": task.answer}).encode(),
        json.dumps({"task_id": task.id, "response": "x" * 10_000_000}).encode(),
        b'{"task_id": "' + task.id.encode() + b'", "response": "\xff\xfe broken utf-8"}',
        b"{not json",
        json.dumps({"task_id": "math/arithmetic/add@easy#nope", "response": "1"}).encode(),
        json.dumps({"task_id": "no/such/domain#1", "response": "1"}).encode(),
    ]
    responses = tmp_path / "responses.jsonl"
    responses.write_bytes(b"\n".join(lines))
    code, doc = run_json(["score", "--domains", str(domains_file), "--responses", str(responses), "--json"], capsys)
    assert code == 0
    assert [row["reward"] for row in doc["tasks"]] == [1.0, 0.0, 0.0]
    assert [p.split(": ")[0].rsplit(":", 1)[1] for p in doc["problems"]] == ["4", "5", "6"]
    assert doc["domains"] == [
        {"domain_id": "math/arithmetic/add@easy", "n": 3, "mean_reward": 1 / 3, "pass_rate": 1 / 3, "infra_errors": 0}
    ]


CODE_YAML = "domains:\n  - family: {kind: code, families: [lists], levels: [easy], humaneval: false}\n"
EXEC_VERIFIER = "    verifier: {kind: plugin, plugin: 'tests.fakes.code_exec:make_exec_code_verifier'}\n"


@pytest.mark.parametrize("verifier", [pytest.param("", id="code_tests"),
                                      pytest.param(EXEC_VERIFIER, id="exec_stand_in")])  # fmt: skip
def test_score_grades_code_domains(verifier: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from posttrain.tasks.pool import TaskPool
    from posttrain.tasks.registry import DomainRegistry, load_domains

    domains_file = tmp_path / "code.yaml"
    domains_file.write_text(CODE_YAML + verifier)
    pool = TaskPool(DomainRegistry.from_config(load_domains(domains_file)))
    task, canary = pool.task("code/function/lists@easy", 0), pool.task("code/canary/impossible", 0)
    responses = tmp_path / "responses.jsonl"
    responses.write_text("\n".join(json.dumps({"task_id": t.id, "response": r}) for t, r in [
        (task, task.answer), (task, "```python\ndef nothing():\n    pass\n```"),
        (canary, canary.metadata["honest_answer"]),
    ]))  # fmt: skip
    code, doc = run_json(["score", "--domains", str(domains_file), "--responses", str(responses), "--json"], capsys)
    assert code == 0 and doc["problems"] == []
    assert [(row["task_id"], row["reward"]) for row in doc["tasks"]] == [(task.id, 1.0), (task.id, 0.0), (canary.id, 0.0)]


def test_bad_domains_yaml_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("domains:\n  - family: {kind: arithmetic\n")
    assert main(["domains", "list", "--domains", str(path)]) == 2
    assert "YAML syntax error" in capsys.readouterr().err


def test_list_without_a_domains_file_shows_the_opt_in_classes_too(capsys: pytest.CaptureFixture[str]) -> None:
    for cls, minimum in (("knowledge", 30), ("3d", 15), ("gamedev", 9), ("code", 9), ("terminal", 9)):
        code, doc = run_json(["domains", "list", "--class", cls, "--json"], capsys)
        assert code == 0 and doc["classes"] == [cls] and doc["count"] >= minimum
        assert not any(row["default"] for row in doc["domains"])
    code, doc = run_json(["domains", "list", "--class", "math", "--json"], capsys)
    assert code == 0 and doc["count"] > 0 and all(row["default"] for row in doc["domains"])
