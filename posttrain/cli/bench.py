"""`posttrain bench NAME [--json] [--out DIR]`: runs a benchmark from its package's `bench` module.

Each benchmark module exposes `main(argv: list[str]) -> int`, writes JSON, and reports every figure
as a ratio against a baseline measured in the same run. `bench all` runs them one after another.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCHMARKS: dict[str, str] = {
    "sandbox": "posttrain.sandbox.bench",
    "curriculum": "posttrain.curriculum.bench",
    "rollout": "posttrain.rollout.bench",
    "pipeline": "posttrain.train.bench",
}


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="run benchmarks (JSON output)")
    parser.add_argument("name", choices=[*BENCHMARKS, "all"], help="which benchmark")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    names = list(BENCHMARKS) if args.name == "all" else [args.name]
    worst = 0
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        worst = max(worst, int(module.main(list(args.rest)) or 0))
    return worst


def emit_report(
    report: dict[str, Any], out_dir: str | Path, filename: str, as_json: bool, show: Callable[[Any], None]
) -> None:
    """Write `report` to `out_dir/filename` and print it (JSON, or `show` for people)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / filename).write_text(json.dumps(report, indent=2))
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        show(report)
