"""`posttrain bench sim --scenario cluster`: the simulator at cluster scale, sync vs async, over pool sizes.

Usage: `posttrain bench sim --scenario cluster [--quick] [--json] [--out DIR] [--images DIR]`.
The scenario: 64 rollout GPUs (one engine each), 1,000 verification workers, one learner group of 64
GPUs, 300 domains in three classes, 512 tasks x 16 samples per step. Sweeps: verification workers
(60 .. 4,000) for sync and async with max_staleness 1, 2, 4; rollout GPUs (16 .. 128); max_staleness
(0 .. 4); the verification timeout (30 .. 600 s). Writes `DIR/sim_cluster.json` and PNG curves into
`--images` (default: DIR).

**Every coefficient here is assumed, none measured** (this machine has no GPU): they are derived from
an 8B dense policy in bf16 on H100 SXM GPUs and stated with their derivation in `ASSUMPTIONS` and in
docs/simulation.md. The figures are what the model implies under those assumptions; the model itself
is checked against local runs by `posttrain bench sim`.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.sched.sim import SimResult, simulate
from posttrain.sched.sim_model import (
    DomainClass,
    LearnerModel,
    LognormalTime,
    ParetoTime,
    PipelineScenario,
    RolloutPool,
    VerifyPool,
)

ASSUMPTIONS: dict[str, str] = {
    "decode_step_s": "6.5 ms: an 8B bf16 policy is 16 GB of weights read once per decode step; at the H100 "
                     "SXM's 3.35 TB/s that is 4.8 ms, at about 75% of peak bandwidth 6.5 ms",
    "token_s": "0.03 ms per generated token: 16 GFLOP at half of the H100's 989 dense bf16 TFLOPS",
    "kv_token_s": "52 ns per generated token per context token: its KV entry (32 layers x 8 KV heads x 128 "
                  "dims x K,V x 2 bytes = 128 KiB) read at 75% of 3.35 TB/s",
    "prefill_token_s": "0.032 ms per prompt token: 16 GFLOP at half of peak",
    "call_s": "0.5 s per generate call (scheduling, detokenising, transfers)",
    "max_batch_seqs": "256 sequences per engine",
    "learner": "64 H100s: 6 x 8e9 = 48 GFLOP per trained token at 40% of peak -> 1.9 us per token; causal "
               "attention 12 x 32 layers x 4096 FLOP per token pair over L^2/2 pairs -> 31 ps per squared row "
               "length; 3 s fixed per update (optimizer step, gradient reduction, bookkeeping); packed sequences",
    "sync_s": "3 s to publish 16 GB of weights to the engines (and, async, for an engine to load them)",
    "verify": "180 math/text domains in-process (lognormal, median 20 ms, sigma 0.5); 90 code domains with "
              "unit tests in a sandbox (lognormal, median 0.8 s, sigma 1.0, per-domain factor within 3x); 30 "
              "agent/terminal domains (Pareto, at least 2 s, tail index 1.5, mean 6 s); timeout 120 s",
    "lengths": "prompts 300 / 500 / 800 tokens, responses median 600 / 800 / 1500 tokens (lognormal sigma "
               "0.7 / 0.6 / 0.5), at most 4096",
}
"""Where each coefficient of the cluster scenario comes from (none is measured)."""

VERIFY_WORKERS = (60, 125, 250, 500, 1000, 2000, 4000)
ROLLOUT_GPUS = (16, 32, 64, 128)
STALENESS = (0, 1, 2, 3, 4)
TIMEOUTS_S = (30.0, 60.0, 120.0, 300.0, 600.0)
MODES: dict[str, tuple[str, int]] = {"sync": ("sync", 0), "async k=1": ("async", 1), "async k=2": ("async", 2),
                                     "async k=4": ("async", 4)}  # fmt: skip
"""Label -> (mode, max_staleness) of the curves."""


def cluster_scenario(steps: int = 16) -> PipelineScenario:
    """The cluster: 64 rollout GPUs, 1,000 verification workers, 300 domains, sync mode."""
    return PipelineScenario(
        name="cluster", seed=0, steps=steps, warmup_steps=3, tasks_per_step=512, group_size=16,
        max_new_tokens=4096,
        domains=(
            DomainClass(name="math/text", num_domains=180, batch_share=180, prompt_tokens=300, response_tokens=600,
                        response_sigma=0.7, verify=LognormalTime(median_s=0.02, sigma=0.5)),
            DomainClass(name="code", num_domains=90, batch_share=90, prompt_tokens=500, response_tokens=800,
                        response_sigma=0.6, verify=LognormalTime(median_s=0.8, sigma=1.0), domain_spread=3.0),
            DomainClass(name="agent/terminal", num_domains=30, batch_share=30, prompt_tokens=800,
                        response_tokens=1500, response_sigma=0.5, verify=ParetoTime(scale_s=2.0, alpha=1.5)),
        ),
        rollout=RolloutPool(num_workers=64, call_s=0.5, decode_step_s=0.0065, token_s=3e-5, kv_token_s=5.2e-8,
                            prefill_token_s=3.2e-5, max_batch_seqs=256),
        verify=VerifyPool(num_workers=1000, timeout_s=120.0),
        learner=LearnerModel(step_s=3.0, token_s=1.9e-6, attention_s=3.1e-11),
        sync_s=3.0,
    )  # fmt: skip


def variant(base: PipelineScenario, label: str, verify_workers: int | None = None, rollout_gpus: int | None = None,
            timeout_s: float | None = None) -> PipelineScenario:  # fmt: skip
    mode, staleness = MODES[label]
    verify = base.verify.model_copy(update={k: v for k, v in {"num_workers": verify_workers, "timeout_s": timeout_s}
                                            .items() if v is not None})  # fmt: skip
    rollout = base.rollout.model_copy(update={"num_workers": rollout_gpus or base.rollout.num_workers})
    return base.model_copy(update={"mode": mode, "max_staleness": staleness, "verify": verify,
                                   "rollout": rollout})  # fmt: skip


def _summary(result: SimResult) -> dict[str, Any]:
    return {"samples_per_s": result.samples_per_s, "step_s": result.step_s, "utilisation": result.utilisation,
            "staleness_mean": result.staleness_mean, "staleness_shares": result.to_dict()["staleness_shares"],
            "breakdown_s": result.breakdown_s, "verify_latency_s": result.verify_latency_s}  # fmt: skip


def sweeps(base: PipelineScenario, verify_workers: tuple[int, ...], rollout_gpus: tuple[int, ...],
           staleness: tuple[int, ...], timeouts_s: tuple[float, ...]) -> dict[str, Any]:  # fmt: skip
    """Every curve of the report: samples/s, utilisation, staleness and breakdown per point."""
    by_workers = {label: {str(v): _summary(simulate(variant(base, label, verify_workers=v))) for v in verify_workers}
                  for label in MODES}  # fmt: skip
    by_gpus = {label: {str(g): _summary(simulate(variant(base, label, rollout_gpus=g))) for g in rollout_gpus}
               for label in ("sync", "async k=1", "async k=4")}  # fmt: skip
    by_staleness = {str(k): _summary(simulate(base.model_copy(update={"mode": "async", "max_staleness": k})))
                    for k in staleness}  # fmt: skip
    by_timeout = {label: {f"{t:g}": _summary(simulate(variant(base, label, timeout_s=t))) for t in timeouts_s}
                  for label in ("sync", "async k=1", "async k=4")}  # fmt: skip
    return {"verify_workers": by_workers, "rollout_gpus": by_gpus, "max_staleness": by_staleness,
            "timeout_s": by_timeout}  # fmt: skip


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench sim --scenario cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    parser.add_argument("--out", default="bench/results", help="directory for sim_cluster.json")
    parser.add_argument("--images", default=None, help="directory for the PNG curves (default: --out)")
    parser.add_argument("--quick", action="store_true", help="fewer steps and points (a smoke run)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    from posttrain.bench.sim_plots import write_cluster_plots

    args = parse_args(argv)
    start = time.perf_counter()
    base = cluster_scenario(steps=6 if args.quick else 16)
    grid = ((250, 1000), (32, 64), (0, 1), (120.0,)) if args.quick else (VERIFY_WORKERS, ROLLOUT_GPUS, STALENESS,
                                                                          TIMEOUTS_S)  # fmt: skip
    report: dict[str, Any] = {
        "command": " ".join(["posttrain bench sim --scenario cluster", *argv]), "quick": args.quick,
        "scenario": base.model_dump(mode="json"), "assumptions": ASSUMPTIONS, "measured": False,
        "machine": platform.machine(), "cpus": os.cpu_count(),
    }  # fmt: skip
    report["sweeps"] = sweeps(base, *grid)
    images = Path(args.images or args.out)
    images.mkdir(parents=True, exist_ok=True)
    report["images"] = write_cluster_plots(report["sweeps"], images)
    report["total_wall_s"] = time.perf_counter() - start
    emit_report(report, args.out, "sim_cluster.json", args.json, _print_summary)
    return 0


def _print_summary(report: dict[str, Any]) -> None:
    for label, points in report["sweeps"]["verify_workers"].items():
        rates = ", ".join(f"{v}: {p['samples_per_s']:.0f}" for v, p in points.items())
        print(f"{label:10s} samples/s by verification workers: {rates}")
    for k, point in report["sweeps"]["max_staleness"].items():
        print(f"async max_staleness {k}: {point['samples_per_s']:.0f} samples/s, mean staleness "
              f"{point['staleness_mean']:.2f}")
    print(f"assumed coefficients (not measured); images: {', '.join(report['images'])}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
