"""Async benchmark: synchronous vs asynchronous training, throughput and learning curve, same seeds.

`posttrain bench async [--config quickstart] [--steps 10] [--seeds 0] [--eval-tasks 16] [--set KEY=VALUE ...]`
runs `posttrain train CONFIG --set steps=N --set seed=S --set dist.mode=M` for M in sync, async and every
seed, one run at a time in its own process (runs side by side would share the CPUs they are timed on),
and writes `async.json`: per run the training samples per second (graded samples over training time,
evaluations excluded), the per-step training reward, the held-out final reward, and for async runs the
seconds generation overlapped learning and the staleness; then per mode the means over seeds, the
throughput ratio async / sync (baseline: the sync runs of the same invocation) and the learning curves'
mean difference async - sync, paired by seed. A curve difference needs several seeds to mean anything:
one seed is an anecdote, and the report says how many it has.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import fmean
from typing import Any

from posttrain.bench.report import emit_report

MODES = ("sync", "async")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench async", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="quickstart", help="YAML path or preset name")
    parser.add_argument("--steps", type=int, default=10, help="RL steps per run")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds; each runs once per mode")
    parser.add_argument("--eval-tasks", type=int, default=16, help="eval.tasks_per_domain (not timed)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override for every run")
    parser.add_argument("--runs", type=Path, default=None, help="run folders (default OUT/async-runs)")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    return parser.parse_args(argv)


def run_training(config: str, run_dir: Path, overrides: list[str]) -> float:
    """One `posttrain train` in a fresh process; its wall seconds."""
    command = [sys.executable, "-m", "posttrain.cli", "train", config, "--run-dir", str(run_dir)]
    for item in overrides:
        command += ["--set", item]
    print(f"[bench async] posttrain {' '.join(command[3:])}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def run_figures(run_dir: Path) -> dict[str, Any]:
    """What the report keeps of one run, from its `metrics.jsonl` and `summary.json`."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    last = rows[-1]
    figures: dict[str, Any] = {
        "steps": len(rows),
        "train_s": last["train_s"],
        "samples_per_s": last["samples_per_s"],
        "rewards": [row["reward"] for row in rows],
        "mean_reward": fmean(row["reward"] for row in rows),
        "final_eval_reward": summary["mean_final_reward"],
        "weights_s": sum(row.get("sync/weights_s", 0.0) for row in rows),
    }
    if "async/overlap_s" in last:
        figures.update({
            "overlap_s": sum(row["async/overlap_s"] for row in rows),
            "staleness_mean": fmean(row["async/staleness_mean"] for row in rows),
            "dropped_stale": sum(row["async/dropped_stale"] for row in rows),
        })
    return figures


def compare(runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Means per mode over seeds, the throughput ratio and the paired curve difference."""
    seeds = sorted(runs["sync"])
    means = {mode: {key: fmean(runs[mode][s][key] for s in seeds)
                    for key in ("samples_per_s", "train_s", "mean_reward", "final_eval_reward")}
             for mode in MODES}  # fmt: skip
    steps = min(len(runs[mode][s]["rewards"]) for mode in MODES for s in seeds)
    curves = {mode: [fmean(runs[mode][s]["rewards"][i] for s in seeds) for i in range(steps)] for mode in MODES}
    deltas = [runs["async"][s]["mean_reward"] - runs["sync"][s]["mean_reward"] for s in seeds]
    return {
        "num_seeds": len(seeds),
        "means": means,
        "samples_per_s_ratio": means["async"]["samples_per_s"] / max(means["sync"]["samples_per_s"], 1e-12),
        "mean_reward_curves": curves,
        "mean_reward_delta": fmean(deltas),
        "mean_reward_delta_per_seed": dict(zip(map(str, seeds), deltas, strict=True)),
        "final_eval_delta": means["async"]["final_eval_reward"] - means["sync"]["final_eval_reward"],
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    runs_root = args.runs or Path(args.out) / "async-runs"
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    report: dict[str, Any] = {
        "command": "posttrain bench async " + " ".join(argv), "config": args.config, "steps": args.steps,
        "overrides": args.overrides, "cpus": os.cpu_count(), "runs": {mode: {} for mode in MODES},
    }
    start = time.perf_counter()
    for seed in seeds:
        for mode in MODES:  # interleaved, so a drift in machine load falls on both modes
            run_dir = runs_root / f"{mode}-seed{seed}"
            overrides = [*args.overrides, f"steps={args.steps}", f"seed={seed}", f"dist.mode={mode}",
                         f"eval.tasks_per_domain={args.eval_tasks}"]
            wall_s = run_training(args.config, run_dir, overrides)
            report["runs"][mode][seed] = {**run_figures(run_dir), "wall_s": round(wall_s, 1)}
    report["comparison"] = compare(report["runs"])
    report["total_wall_s"] = round(time.perf_counter() - start, 1)
    emit_report(report, args.out, "async.json", args.json, _print_table)
    return 0


def _print_table(report: dict[str, Any]) -> None:
    comparison = report["comparison"]
    for mode in MODES:
        m = comparison["means"][mode]
        print(f"{mode:6s} {m['samples_per_s']:8.1f} samples/s  train {m['train_s']:7.1f} s  "
              f"mean train reward {m['mean_reward']:.3f}  final eval {m['final_eval_reward']:.3f}")
    print(f"async / sync samples/s: {comparison['samples_per_s_ratio']:.2f}; mean reward async - sync: "
          f"{comparison['mean_reward_delta']:+.3f} over {comparison['num_seeds']} seed(s)")
