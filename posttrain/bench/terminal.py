"""Terminal rollouts: what giving an episode its own copy of a built task costs.

`python bench/terminal.py [--json] [--out DIR] [--rounds N]` builds one example package (a
Dockerfile with COPY and RUN), then times, interleaved round by round on the same task: a cold
`Sandbox.fork` of its snapshot, the warm path every episode after the first takes (`checkout` of a
restored fork + `checkin`, which restores it: the per-rollout cost, goal <= 10 ms), and, as the
baseline measured in the same run, one `bash -c true` in the episode's sandbox (the cheapest command an
episode can run). Figures are medians in ms and ratios to that baseline; JSON in
`DIR/terminal.json` (default `bench/results`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.sandbox.background import run_blocking
from posttrain.tasks.terminal.build import TaskSnapshot, prepare
from posttrain.tasks.terminal.package import load_package

PACKAGE = (
    Path(__file__).resolve().parents[2] / "tests" / "tasks" / "data" / "terminal" / "files" / "make-file"
)
GOAL_MS = 10.0


async def _round(snap: TaskSnapshot) -> dict[str, float]:
    t0 = time.perf_counter()
    cold = await snap.base.fork(snap.snapshot)
    t1 = time.perf_counter()
    await cold.close()
    t2 = time.perf_counter()
    sandbox = await snap.checkout()
    t3 = time.perf_counter()
    await sandbox.exec(["bash", "-c", "true"])
    t4 = time.perf_counter()
    await sandbox.exec(["bash", "-c", "echo x > written"])
    t5 = time.perf_counter()
    await snap.checkin(sandbox)
    t6 = time.perf_counter()
    return {"cold_fork_ms": (t1 - t0) * 1e3, "checkout_ms": (t3 - t2) * 1e3, "command_ms": (t4 - t3) * 1e3,
            "checkin_ms": (t6 - t5) * 1e3, "warm_fork_ms": (t3 - t2 + t6 - t5) * 1e3}  # fmt: skip


def measure(rounds: int) -> dict[str, Any]:
    start = time.perf_counter()
    snap = prepare(load_package(PACKAGE))
    build_s = time.perf_counter() - start
    run_blocking(
        snap.checkin(run_blocking(snap.checkout(), 60)), 60
    )  # one warm fork, as after the first episode
    samples = [run_blocking(_round(snap), 120) for _ in range(rounds)]
    medians = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
    baseline = medians["command_ms"]
    return {
        "package": PACKAGE.name,
        "rounds": rounds,
        "build_s": round(build_s, 3),
        "p50_ms": {key: round(value, 3) for key, value in medians.items()},
        "warm_fork_vs_command": round(medians["warm_fork_ms"] / baseline, 3),
        "cold_fork_vs_command": round(medians["cold_fork_ms"] / baseline, 3),
        "goal_ms": GOAL_MS,
        "meets_goal": medians["warm_fork_ms"] <= GOAL_MS,
    }


def _show(report: dict[str, Any]) -> None:
    p50 = report["p50_ms"]
    print(f"terminal rollouts ({report['rounds']} rounds, build {report['build_s']} s)")
    for key, value in p50.items():
        print(f"  {key:14s} {value:8.2f} ms")
    print(f"  warm fork per rollout: {report['warm_fork_vs_command']}x one command "
          f"(goal <= {report['goal_ms']} ms: {'met' if report['meets_goal'] else 'missed'})")  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/terminal.py")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    emit_report(measure(args.rounds), args.out, "terminal.json", args.json, _show)
    return 0
