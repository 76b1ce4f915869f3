"""The files the run report reads (`posttrain.eval.report`), gathered into one `RunFiles` record.

`read_run` reads `config.yaml`, `summary.json`, `metrics.jsonl`, `eval_<label>.json` (base, `step<N>`,
final), and when present `matrix.json` (the checkpoint x domain matrix: `--matrix PATH`, else `RUN_DIR/matrix.json`
or `RUN_DIR/*/matrix.json`), `hacking.json` and `spotcheck/agreement.json`.

Guarantees: read-only; a missing optional file is None, and a file that is not valid JSON (or a torn
line of `metrics.jsonl`) is None (or skipped) with a line in `problems` instead of an exception. Readers
keep whole JSON objects; the sections use only the fields they show and ignore any others. Not here:
rendering (`report_html`, `report_figures`, `report_svg`), or anything that needs torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.errors import UsageError


@dataclass(frozen=True)
class EvalPoint:
    """One greedy evaluation of the run: `eval_<label>.json` placed at the step it was taken."""

    step: int
    label: str
    domains: dict[str, dict[str, Any]]
    """Domain id -> `DomainEval.to_dict()` (mean_reward, pass_rate, ci_low, ci_high, num_tasks, ...)."""


@dataclass
class RunFiles:
    """What the report reads from a run directory; None where a file is absent or unreadable."""

    run_dir: Path
    config_text: str | None = None
    summary: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    """`metrics.jsonl` by step; a step logged twice (a resume) keeps its last row."""
    evals: list[EvalPoint] = field(default_factory=list)
    """Greedy evaluations in step order: base at 0, `step<N>` at N, final at the last step."""
    matrix: dict[str, Any] | None = None
    matrix_path: Path | None = None
    hacking: dict[str, Any] | None = None
    agreement: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    """Files that exist but could not be read, with the reason."""

    @property
    def last_step(self) -> int:
        if self.rows:
            return int(self.rows[-1]["step"])
        return int((self.summary or {}).get("steps", 0) or 0)


def read_run(run_dir: Path, matrix_path: Path | None = None) -> RunFiles:
    """Read every file the report uses; raises `UsageError` when `run_dir` holds none of a run's files."""
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory")
    markers = ("config.yaml", "summary.json", "metrics.jsonl")
    if not any((run_dir / name).is_file() for name in markers):
        raise UsageError(f"{run_dir} is not a run directory (none of {', '.join(markers)})")
    files = RunFiles(run_dir=run_dir)
    config_path = run_dir / "config.yaml"
    if config_path.is_file():
        files.config_text = config_path.read_text(encoding="utf-8", errors="replace")
    files.summary = _json_object(run_dir / "summary.json", files.problems)
    files.rows = _metrics_rows(run_dir / "metrics.jsonl", files.problems)
    files.evals = _evals(run_dir, files.last_step, files.problems)
    files.matrix_path = matrix_path or _find_matrix(run_dir)
    if matrix_path is not None and not matrix_path.is_file():
        raise UsageError(f"--matrix {matrix_path}: no such file")
    if files.matrix_path is not None:
        files.matrix = _json_object(files.matrix_path, files.problems)
    files.hacking = _json_object(run_dir / "hacking.json", files.problems)
    files.agreement = _json_object(run_dir / "spotcheck" / "agreement.json", files.problems)
    return files


def _find_matrix(run_dir: Path) -> Path | None:
    direct = run_dir / "matrix.json"
    if direct.is_file():
        return direct
    nested = sorted(run_dir.glob("*/matrix.json"))
    return nested[0] if nested else None


def _json_object(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """The JSON object in `path`; None when absent; None and a problem line when unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problems.append(f"{path.name}: {exc}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name}: expected a JSON object, got {type(data).__name__}")
        return None
    return data


def _metrics_rows(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            by_step[int(row["step"])] = row
        except (ValueError, KeyError, TypeError) as exc:  # a run killed mid-write leaves a partial last line
            problems.append(f"{path.name}:{number}: {type(exc).__name__}")
    return [by_step[s] for s in sorted(by_step)]


_EVAL_FILE = re.compile(r"eval_(base|final|step(\d+))\.json")


def _evals(run_dir: Path, last_step: int, problems: list[str]) -> list[EvalPoint]:
    evals = []
    for path in run_dir.glob("eval_*.json"):
        match = _EVAL_FILE.fullmatch(path.name)
        if match is None:  # sampled evaluations and other files
            continue
        label = match[1]
        step = 0 if label == "base" else last_step if label == "final" else int(match[2])
        doc = _json_object(path, problems)
        if doc is not None:
            evals.append(EvalPoint(step, label, {d: e for d, e in doc.items() if isinstance(e, dict)}))
    order = {"base": 0, "final": 2}
    return sorted(evals, key=lambda e: (e.step, order.get(e.label, 1)))
