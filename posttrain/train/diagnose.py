"""Per domain and evaluation point: what the training signal did next to what held-out evaluation saw.

`posttrain diagnose RUN_DIR` reads a finished (or running) run directory — `metrics.jsonl` and the
`eval_<label>.json` / `eval_<label>_sampled.json` files — and prints, for every trained domain and every
evaluation point (base, `step<N>`, final), the mean over the training steps since the previous point of:
sampled train reward, response length, policy entropy, KL to the base (when the run tracked it:
`policy.track_kl_to_base` or `loss.kl_beta > 0`) and the fraction of zero-signal groups; next to the
point's greedy held-out pass rate and, when the run sampled its evaluations (`eval.samples_per_task`),
sampled held-out pass@1. Evaluations between the ends come from `eval.every_steps`.

Guarantees: read-only, pure over the files; a metric the run did not record is shown as "-".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_STEP_LABEL = re.compile(r"^eval_(base|final|step(\d+))\.json$")


@dataclass(frozen=True)
class Row:
    """One domain at one evaluation point; training columns average the steps since the previous point."""

    domain_id: str
    step: int
    greedy: float | None
    sampled: float | None
    train_reward: float | None
    response_tokens: float | None
    entropy: float | None
    kl_base: float | None
    zero_signal: float | None


def eval_points(run_dir: Path, steps: int) -> list[tuple[int, str]]:
    """(step, label) of every greedy evaluation in the run dir, in step order."""
    points = []
    for path in run_dir.glob("eval_*.json"):
        match = _STEP_LABEL.match(path.name)
        if match is None:
            continue
        label = match.group(1)
        step = 0 if label == "base" else steps if label == "final" else int(match.group(2))
        points.append((step, label))
    return sorted(points)


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if key in r]
    return sum(values) / len(values) if values else None


def diagnose(run_dir: Path) -> list[Row]:
    """Rows for every trained domain (those the training steps sampled) and evaluation point."""
    steps_log = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    last_step = max((int(r["step"]) for r in steps_log), default=0)
    trained = sorted({k.split("/", 1)[1].rsplit("/", 1)[0] for r in steps_log for k in r
                      if k.startswith("domain/") and k.endswith("/samples")})
    rows: list[Row] = []
    previous = 0
    for step, label in eval_points(run_dir, last_step):
        greedy = json.loads((run_dir / f"eval_{label}.json").read_text())
        sampled_path = run_dir / f"eval_{label}_sampled.json"
        sampled = json.loads(sampled_path.read_text()) if sampled_path.is_file() else {}
        window = [r for r in steps_log if previous < int(r["step"]) <= step]
        for domain in trained:
            seen = [r for r in window if r.get(f"domain/{domain}/samples", 0) > 0]
            rows.append(Row(
                domain_id=domain,
                step=step,
                greedy=greedy[domain]["pass_rate"] if domain in greedy else None,
                sampled=sampled[domain]["pass_at_1"] if domain in sampled else None,
                train_reward=_mean(seen, f"domain/{domain}/reward"),
                response_tokens=_mean(seen, f"domain/{domain}/response_tokens"),
                entropy=_mean(window, f"entropy/{domain}"),
                kl_base=_mean(window, f"kl_base/{domain}"),
                zero_signal=_mean(seen, f"domain/{domain}/zero_variance"),
            ))  # fmt: skip
        previous = step
    return rows


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(rows: list[Row]) -> str:
    """The rows as one markdown table, grouped by domain."""
    lines = [
        "| domain | step | greedy held-out | sampled held-out | sampled train (window) | response tokens "
        "| entropy | KL to base | zero-signal groups |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.domain_id, r.step)):
        lines.append(
            f"| {r.domain_id} | {r.step} | {_cell(r.greedy)} | {_cell(r.sampled)} | {_cell(r.train_reward)} "
            f"| {_cell(r.response_tokens, 1)} | {_cell(r.entropy)} | {_cell(r.kl_base, 4)} "
            f"| {_cell(r.zero_signal, 2)} |"
        )
    return "\n".join(lines)
