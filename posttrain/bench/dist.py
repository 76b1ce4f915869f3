"""Training throughput in one process against Ray worker pools, on a preset cut down.

`python bench/dist.py [--json] [--out DIR] [--config PRESET] [--scaling] [--steps N] [--tasks-per-step T]
[--eval-tasks E] [--rounds R]` (`posttrain bench dist`): trains the preset (default quickstart; its tiny
base model, built first if missing) for N steps several ways with the same seed, R interleaved rounds,
all while one local Ray cluster with the machine's CPUs runs (started once, not counted). Default
variants: `local` (everything in this process: the baseline), `ray_1` and `ray_2` (1 and 2 rollout
workers, 2 reward workers each). `--scaling` (for a sandbox-heavy preset such as `code-tiny`) runs the
scaling curve instead: local with 1, 2 and 4 verifier worker processes (`local_rw1`, the baseline, ...),
Ray with 1 rollout worker and 1, 2 and 4 reward workers (`ray_rw1` ...), and Ray with 2 rollout + 2
reward workers (`ray_2_rw2`). Per variant: the median over rounds of samples/s of the training steps
(`samples_per_s` of the last metrics row: evaluations and the pools' start-up excluded), of the run's
wall time and of each stage's seconds per step (the metrics' `time/*`, mean over steps), and its per-step
losses; each variant's samples/s as a ratio to the baseline's, and whether
its losses equal the baseline's bit for bit (else the largest difference). JSON in `DIR/dist.json`
(`DIR/dist_scaling_<preset>.json` with `--scaling`). Not in `bench all`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.dist.cluster import ray_session
from posttrain.dist.config import DistConfig
from posttrain.train.base_model import ensure_tiny_base
from posttrain.train.config import TrainConfig, load_train_config, resolve_config_path
from posttrain.train.loop import train

RAY = "dist.backend=ray"
RUNS = {"local": [], "ray_1": [RAY, "dist.rollout_workers=1", "dist.reward_workers=2"],
        "ray_2": [RAY, "dist.rollout_workers=2", "dist.reward_workers=2"]}  # fmt: skip
"""Name -> the `--set` overrides of that run on top of the cut-down preset; the first is the baseline."""
SCALING = {
    **{f"local_rw{n}": [f"reward.workers={n}"] for n in (1, 2, 4)},
    **{f"ray_rw{n}": [RAY, "dist.rollout_workers=1", f"dist.reward_workers={n}"] for n in (1, 2, 4)},
    "ray_2_rw2": [RAY, "dist.rollout_workers=2", "dist.reward_workers=2"],
}
"""The scaling curve's variants (`--scaling`); `local_rw1` is the baseline."""


def run_once(config: TrainConfig) -> dict[str, Any]:
    """Train `config` in a scratch run directory; its throughput, wall time and losses."""
    run_dir = Path(tempfile.mkdtemp(prefix="posttrain-bench-dist-"))
    try:
        start_s = time.perf_counter()
        train(config, run_dir, log=lambda _: None)
        wall_s = time.perf_counter() - start_s
        rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    stages = sorted({key for row in rows for key in row if key.startswith("time/")})
    stage_s = {key[5:]: round(statistics.fmean(row.get(key, 0.0) for row in rows), 3) for key in stages}
    return {"samples_per_s": round(rows[-1]["samples_per_s"], 2), "train_s": rows[-1]["train_s"],
            "wall_s": round(wall_s, 1), "stage_s": stage_s, "losses": [row["loss"] for row in rows]}  # fmt: skip


def measure(steps: int, tasks_per_step: int, eval_tasks: int, rounds: int, preset: str = "quickstart",
            variants: dict[str, list[str]] | None = None) -> dict[str, Any]:
    variants = variants or RUNS
    cut = [f"steps={steps}", f"tasks_per_step={tasks_per_step}", f"eval.tasks_per_domain={eval_tasks}"]
    path = resolve_config_path(preset)
    configs = {name: load_train_config(path, cut + extra) for name, extra in variants.items()}
    baseline = next(iter(configs))
    ensure_tiny_base(configs[baseline].tiny_base, configs[baseline].domains, log=lambda _: None)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    with ray_session(DistConfig(backend="ray")):
        for _ in range(rounds):  # interleaved, so that load from elsewhere falls on every variant alike
            for name, config in configs.items():
                samples[name].append(run_once(config))
    runs = {name: _median_run(rs) for name, rs in samples.items()}
    base = runs[baseline]
    for run in runs.values():
        run["samples_per_s_vs_baseline"] = round(run["samples_per_s"] / base["samples_per_s"], 3)
        run["losses_equal_baseline"] = run["losses"] == base["losses"]
        run["max_loss_diff"] = max(abs(a - b) for a, b in zip(run["losses"], base["losses"], strict=True))
    return {"workload": {"preset": preset, "steps": steps, "tasks_per_step": tasks_per_step,
                         "group_size": configs[baseline].rollout.group_size, "eval_tasks_per_domain": eval_tasks},
            "baseline": baseline, "variants": variants, "rounds": rounds, "runs": runs}  # fmt: skip


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median figures of one variant's rounds; its losses (the same every round: fixed seed)."""
    return {"samples_per_s": statistics.median(r["samples_per_s"] for r in runs),
            "samples_per_s_rounds": [r["samples_per_s"] for r in runs],
            "wall_s": statistics.median(r["wall_s"] for r in runs), "losses": runs[0]["losses"],
            "stage_s": {key: statistics.median(r["stage_s"].get(key, 0.0) for r in runs) for key in runs[0]["stage_s"]},
            "losses_same_every_round": all(r["losses"] == runs[0]["losses"] for r in runs)}  # fmt: skip


def _show(report: dict[str, Any]) -> None:
    w = report["workload"]
    base = report["baseline"]
    print(f"{w['preset']}, {w['steps']} steps x {w['tasks_per_step']} tasks x {w['group_size']} samples, "
          f"medians of {report['rounds']} rounds")
    for name, run in report["runs"].items():
        same = f"losses = {base}" if run["losses_equal_baseline"] else f"max loss diff {run['max_loss_diff']:.2e}"
        stages = " ".join(f"{key[:-2]} {value:.2f}" for key, value in run["stage_s"].items())
        print(f"  {name:9s} {run['samples_per_s']:8.1f} samples/s ({run['samples_per_s_vs_baseline']:.2f}x {base})"
              f"  wall {run['wall_s']:6.1f} s  {same}  s/step: {stages}")  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench dist", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="folder for the JSON report")
    parser.add_argument("--config", default="quickstart", help="preset name or YAML path")
    parser.add_argument("--scaling", action="store_true", help="the scaling curve's variants (1/2/4 reward workers)")
    parser.add_argument("--steps", type=int, default=5, help="training steps per run")
    parser.add_argument("--tasks-per-step", type=int, default=32, help="tasks per step (x group size samples)")
    parser.add_argument("--eval-tasks", type=int, default=8, help="eval tasks per domain (base and final)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians reported)")
    args = parser.parse_args(argv)
    variants = SCALING if args.scaling else RUNS
    report = measure(args.steps, args.tasks_per_step, args.eval_tasks, args.rounds, args.config, variants)
    name = f"dist_scaling_{Path(args.config).stem}.json" if args.scaling else "dist.json"
    emit_report(report, args.out, name, args.json, _show)
    return 0
