"""Offline grading: a JSONL file of `{"task_id", "response"}` against the configured domains.

Tolerant by design: a malformed line (bad JSON, missing field, unknown task id) is reported as
`file:line: reason` and skipped; invalid UTF-8 inside a response is decoded with replacement characters
rather than rejected, since that is the model's output to be graded, not the file's fault.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from posttrain.errors import ConfigError
from posttrain.tasks.pool import TaskPool
from posttrain.types import Task
from posttrain.verify import ExecutorConfig


def score_responses(pool: TaskPool, path: str | Path, workers: int = 0) -> dict[str, Any]:
    """Grade every line through a `Grader` (`workers` verifier processes, 0: inline); returns
    `{"tasks": [...], "domains": [...], "problems": [...]}`."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read responses: {exc.strerror or exc}") from None
    problems: list[str] = []
    graded: list[tuple[int, Task, str]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            task_id, response = _parse_line(raw)
            graded.append((number, pool.get(task_id), response))
        except (ValueError, ConfigError) as exc:
            problems.append(f"{path}:{number}: {exc}")
    with pool.registry.grader(ExecutorConfig(num_workers=workers)) as grader:
        scores = grader.grade([(task, response) for _, task, response in graded])
    rows = [
        {
            "line": number,
            "task_id": task.id,
            "domain_id": task.domain_id,
            "reward": score.reward,
            "passed": score.passed,
            "error": score.error.value,
            "message": score.message,
        }
        for (number, task, _), score in zip(graded, scores, strict=True)
    ]
    return {"tasks": rows, "domains": _summarise(rows), "problems": problems}


def _parse_line(raw: bytes) -> tuple[str, str]:
    try:
        obj = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str):
        raise ValueError('expected an object with a string "task_id"')
    response = obj.get("response")
    if not isinstance(response, str):
        raise ValueError('expected a string "response"')
    return obj["task_id"], response


def _summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain_id"]].append(row)
    out = []
    for domain_id, items in by_domain.items():
        graded = [r for r in items if r["error"] != "infra"]
        out.append(
            {
                "domain_id": domain_id,
                "n": len(items),
                "mean_reward": sum(r["reward"] for r in graded) / len(graded) if graded else None,
                "pass_rate": sum(r["passed"] for r in graded) / len(graded) if graded else None,
                "infra_errors": len(items) - len(graded),
            }
        )
    return out


def print_report(report: dict[str, Any]) -> None:
    console = Console()
    table = Table(title="per-domain scores")
    for column in ("domain", "n", "mean reward", "pass rate", "infra errors"):
        table.add_column(column)
    for d in report["domains"]:
        reward = "-" if d["mean_reward"] is None else f"{d['mean_reward']:.3f}"
        rate = "-" if d["pass_rate"] is None else f"{d['pass_rate']:.3f}"
        table.add_row(d["domain_id"], str(d["n"]), reward, rate, str(d["infra_errors"]))
    console.print(table)
    for problem in report["problems"]:
        console.print(f"[yellow]skipped[/yellow] {problem}")
