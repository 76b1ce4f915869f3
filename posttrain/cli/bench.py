"""`posttrain bench NAME [--json] [--out DIR]`: runs a benchmark module of `posttrain.bench`.

Each benchmark module exposes `main(argv: list[str]) -> int`, writes JSON, and reports every figure
as a ratio against a baseline measured in the same run. `bench all` runs them one after another.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

BENCHMARKS: dict[str, str] = {
    "sandbox": "posttrain.bench.sandbox",
    "curriculum": "posttrain.bench.curriculum",
    "rollout": "posttrain.bench.rollout",
    "pipeline": "posttrain.bench.pipeline",
    "learning": "posttrain.bench.learning",
    "agents": "posttrain.bench.agents",
    "terminal": "posttrain.bench.terminal",
    "code": "posttrain.bench.code",
    "update": "posttrain.bench.update",
    "gamedev": "posttrain.bench.gamedev",
    "cad": "posttrain.bench.cad",
    "knowledge": "posttrain.bench.knowledge",
    "async": "posttrain.bench.async_mode",
    "dist": "posttrain.bench.dist",
    "sim": "posttrain.bench.sim_validate",
}
ALL = ("sandbox", "curriculum", "rollout", "pipeline", "agents", "terminal", "code", "update", "gamedev", "cad",
       "knowledge")
"""What `bench all` runs: `learning` trains four runs (about 12 minutes) and is run on its own, as is `dist`
(it starts a Ray cluster), `async` and `sim` (it trains about ten short runs to check the pipeline
simulator); `knowledge` runs its default preset (a 4K-token document, about a minute; `--full` is the 16K
one)."""


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="run benchmarks (JSON output)")
    parser.add_argument("name", choices=[*BENCHMARKS, "all"], help="which benchmark")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    names = list(ALL) if args.name == "all" else [args.name]
    worst = 0
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        worst = max(worst, int(module.main(list(args.rest)) or 0))
    return worst
