"""Offline grading: a JSONL file of `{"task_id", "response"}` against the configured domains.

A line may carry `"turns": [assistant message, ...]` instead of `"response"` (exactly one of the two):
an agent domain runs its environment on them in order, any other domain grades them joined by newlines
(`Grader.grade_turns`). Rows of episodes gain their per-episode counters (`EPISODE_ROW_KEYS` present in
the score's details), and a domain's summary gains `"agent"`, what the caller's `episode_summary` makes
of its scores (the CLI passes `posttrain.eval.agent_metrics.episode_metrics`), when that is not empty.
Plain response lines of single-turn domains give the same report as before.

Tolerant by design: a malformed line (bad JSON, missing field, unknown task id) is reported as
`file:line: reason` and skipped; invalid UTF-8 inside a response is decoded with replacement characters
rather than rejected, since that is the model's output to be graded, not the file's fault.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from posttrain.envs.base import EPISODE_METRICS
from posttrain.errors import ConfigError
from posttrain.tasks.pool import TaskPool
from posttrain.types import Score, Task
from posttrain.verify import ExecutorConfig, Grader

EPISODE_ROW_KEYS = (*EPISODE_METRICS, "completion")
"""Detail keys of an episode's score copied into its report row."""
EpisodeSummary = Callable[[Sequence[Score]], dict[str, Any]]
"""One domain's scores -> its aggregated episode metrics ({} when it has no episode)."""
Answer = str | list[str]
"""A line's `response`, or its `turns`."""


def score_responses(
    pool: TaskPool, path: str | Path, workers: int = 0, episode_summary: EpisodeSummary | None = None
) -> dict[str, Any]:
    """Grade every line through a `Grader` (`workers` verifier processes, 0: inline); returns
    `{"tasks": [...], "domains": [...], "problems": [...]}`."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read responses: {exc.strerror or exc}") from None
    problems: list[str] = []
    graded: list[tuple[int, Task, Answer]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            task_id, answer = _parse_line(raw)
            graded.append((number, pool.get(task_id), answer))
        except (ValueError, ConfigError) as exc:
            problems.append(f"{path}:{number}: {exc}")
    with pool.registry.grader(ExecutorConfig(num_workers=workers)) as grader:
        scores = _grade(grader, [(task, answer) for _, task, answer in graded])
    rows = [_row(number, task, score) for (number, task, _), score in zip(graded, scores, strict=True)]
    domains = _summarise(rows)
    if episode_summary is not None:
        _add_episode_summaries(domains, [task.domain_id for _, task, _ in graded], scores, episode_summary)
    return {"tasks": rows, "domains": domains, "problems": problems}


def _grade(grader: Grader, items: list[tuple[Task, Answer]]) -> list[Score]:
    """Responses in one batch (the worker pool's), turns through `grade_turns`; scores in line order."""
    is_turns = [isinstance(answer, list) for _, answer in items]
    responses = iter(grader.grade([(t, a) for t, a in items if isinstance(a, str)]))
    turns = iter(grader.grade_turns([(t, a) for t, a in items if isinstance(a, list)]))
    return [next(turns) if flag else next(responses) for flag in is_turns]


def _row(number: int, task: Task, score: Score) -> dict[str, Any]:
    row: dict[str, Any] = {
        "line": number,
        "task_id": task.id,
        "domain_id": task.domain_id,
        "reward": score.reward,
        "passed": score.passed,
        "error": score.error.value,
        "message": score.message,
    }
    if all(key in score.details for key in EPISODE_METRICS):
        row.update({key: score.details[key] for key in EPISODE_ROW_KEYS if key in score.details})
    return row


def _add_episode_summaries(
    domains: list[dict[str, Any]], domain_ids: list[str], scores: list[Score], summary: EpisodeSummary
) -> None:
    for domain in domains:
        metrics = summary([s for d, s in zip(domain_ids, scores, strict=True) if d == domain["domain_id"]])
        if metrics:
            domain["agent"] = metrics


def _parse_line(raw: bytes) -> tuple[str, Answer]:
    try:
        obj = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str):
        raise ValueError('expected an object with a string "task_id"')
    if ("response" in obj) == ("turns" in obj):
        raise ValueError('expected exactly one of "response" and "turns"')
    if "turns" in obj:
        turns = obj["turns"]
        if not isinstance(turns, list) or not all(isinstance(turn, str) for turn in turns):
            raise ValueError('expected "turns" to be a list of strings')
        return obj["task_id"], turns
    response = obj["response"]
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
    agents = [d for d in report["domains"] if d.get("agent")]
    if agents:
        console.print(episode_table(agents))
    for problem in report["problems"]:
        console.print(f"[yellow]skipped[/yellow] {problem}")


def episode_table(domains: list[dict[str, Any]]) -> Table:
    """The agent domains' episode metrics: success, completion, tool-call success, recovery (`-`: none)."""
    table = Table(title="agent domains: episodes")
    for column in ("domain", "episodes", "success", "completion", "tool-call success", "recovery"):
        table.add_column(column)
    for d in domains:
        m = d["agent"]
        cells = [
            _fraction(m.get(key))
            for key in ("success_rate", "completion", "tool_call_success", "recovery_rate")
        ]
        table.add_row(d["domain_id"], str(int(m["episodes"])), *cells)
    return table


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
