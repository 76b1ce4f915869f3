"""PNG figures for the pipeline simulator's benchmarks: cluster-scale curves and the local validation.

Uses matplotlib's non-interactive Agg backend; imported only when plots are asked for. Reads only the
benchmarks' report dictionaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

POOLS = ("rollout", "verify", "learner")


def write_cluster_plots(sweeps: dict[str, Any], out: Path) -> list[str]:
    """Throughput and utilisation against verification workers, throughput against rollout GPUs and the
    verification timeout, and the staleness distribution; returns the file names."""
    return [_by_workers(sweeps["verify_workers"], out), _by_gpus_and_timeout(sweeps, out),
            _staleness(sweeps["max_staleness"], out)]  # fmt: skip


def _by_workers(curves: dict[str, Any], out: Path) -> str:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    for label, points in curves.items():
        x = [int(v) for v in points]
        left.plot(x, [p["samples_per_s"] for p in points.values()], marker="o", label=label)
    _log_ticks(left, [int(v) for v in next(iter(curves.values()))])
    left.set_xlabel("verification workers")
    left.set_ylabel("samples / s")
    left.set_title("throughput (64 rollout GPUs; async k = max_staleness)", fontsize=10)
    left.legend(fontsize=8)
    for label, style in (("sync", "--"), ("async k=2", "-")):
        points = curves[label]
        x = [int(v) for v in points]
        for colour, pool in enumerate(POOLS):
            right.plot(x, [p["utilisation"][pool] for p in points.values()], ls=style, marker=".",
                       color=f"C{colour}", label=f"{pool} ({label})")  # fmt: skip
    _log_ticks(right, [int(v) for v in curves["sync"]])
    right.set_ylim(0, 1.05)
    right.set_xlabel("verification workers")
    right.set_ylabel("share of worker time serving")
    right.set_title("utilisation per pool", fontsize=10)
    right.legend(fontsize=7, ncol=2)
    for ax in (left, right):
        ax.grid(alpha=0.3)
    return _save(fig, out, "sim_verify_workers.png")


def _by_gpus_and_timeout(sweeps: dict[str, Any], out: Path) -> str:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    for label, points in sweeps["rollout_gpus"].items():
        left.plot([int(g) for g in points], [p["samples_per_s"] for p in points.values()], marker="o", label=label)
    _log_ticks(left, [int(g) for g in next(iter(sweeps["rollout_gpus"].values()))])
    left.set_xlabel("rollout GPUs")
    left.set_title("throughput (1,000 verification workers)", fontsize=10)
    for label, points in sweeps["timeout_s"].items():
        right.plot([float(t) for t in points], [p["samples_per_s"] for p in points.values()], marker="o",
                   label=label)  # fmt: skip
    _log_ticks(right, [float(t) for t in next(iter(sweeps["timeout_s"].values()))])
    right.set_xlabel("verification timeout (s)")
    right.set_title("throughput against the verification timeout", fontsize=10)
    for ax in (left, right):
        ax.set_ylabel("samples / s")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, out, "sim_gpus_timeout.png")


def _staleness(points: dict[str, Any], out: Path) -> str:
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    bounds = [int(k) for k in points]
    left.plot(bounds, [p["samples_per_s"] for p in points.values()], marker="o", color="C0")
    left.set_xticks(bounds)
    left.set_xlabel("max_staleness (async)")
    left.set_ylabel("samples / s", color="C0")
    twin = left.twinx()
    twin.plot(bounds, [p["staleness_mean"] for p in points.values()], marker="s", color="C3")
    twin.set_ylabel("mean staleness (versions)", color="C3")
    left.set_title("throughput and mean staleness", fontsize=10)
    left.grid(alpha=0.3)
    ages = sorted({int(a) for p in points.values() for a in p["staleness_shares"]})
    bottom = [0.0] * len(bounds)
    for age in ages:
        shares = [p["staleness_shares"].get(str(age), 0.0) for p in points.values()]
        right.bar(bounds, shares, bottom=bottom, label=f"{age} version{'s' if age != 1 else ''} old")
        bottom = [b + s for b, s in zip(bottom, shares, strict=True)]
    right.set_xticks(bounds)
    right.set_xlabel("max_staleness (async)")
    right.set_ylabel("share of samples")
    right.set_title("staleness of the samples learned from", fontsize=10)
    right.legend(fontsize=8)
    return _save(fig, out, "sim_staleness.png")


def write_validation_plot(report: dict[str, Any], out: Path) -> str:
    """Measured against predicted samples/s and the per-stage step times of each local config."""
    configs = report["configs"]
    names = list(configs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    x = range(len(names))
    measured = [configs[n]["measured_samples_per_s"] for n in names]
    left.bar([i - 0.2 for i in x], measured, 0.4, label="measured (median step)")
    left.bar([i + 0.2 for i in x], [configs[n]["predicted_samples_per_s"] for n in names], 0.4, label="simulated")
    for i, name in enumerate(names):
        left.annotate(f"{100 * configs[name]['relative_error']:+.0f}%",
                      (i + 0.2, configs[name]["predicted_samples_per_s"]), ha="center", va="bottom", fontsize=8)
    left.set_xticks(list(x), names)
    left.set_ylabel("samples / s")
    left.set_title("local runs: measured vs simulated", fontsize=10)
    left.legend(fontsize=8)
    stages = (("generate_s", "generate_s"), ("verify_s", "verify_s"), ("learn_s", "learn_s"), ("other_s", "sync_s"))
    for side, (key, offset) in enumerate((("measured_stages_s", -0.2), ("predicted_stages_s", 0.2))):
        bottom = [0.0] * len(names)
        for colour, pair in enumerate(stages):
            values = [max(configs[n][key][pair[side]], 0.0) for n in names]  # async: the rest can be < 0
            right.bar([i + offset for i in x], values, 0.4, bottom=bottom, color=f"C{colour}",
                      label=pair[0].removesuffix("_s") if side == 0 else None, alpha=1.0 if side == 0 else 0.55)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        right.scatter([i + offset for i in x], [configs[n][key]["step_s"] for n in names], marker="_", s=400,
                      color="black", zorder=3, label="step" if side == 0 else None)
    right.set_xticks(list(x), names)
    right.set_ylabel("seconds per step (left bar measured, right bar simulated)")
    right.set_title("time per step by stage (black: the step; async stages overlap)", fontsize=10)
    right.legend(fontsize=8)
    return _save(fig, out, "sim_validation.png")


def _log_ticks(ax: Any, values: list[float]) -> None:
    ax.set_xscale("log")
    ax.set_xticks(values, [f"{v:g}" for v in values])
    ax.minorticks_off()


def _save(fig: Any, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    plt.close(fig)
    return name
