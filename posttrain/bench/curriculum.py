"""`posttrain bench curriculum`: every mixture x N seeds x both committed simulator worlds.

Prints a table (or JSON with `--json`), writes `<out>/curriculum.json` and PNGs of learning curves and
weight trajectories. Each figure is a mean over seeds with a 95% confidence interval (Student t), and
steps-to-target is also reported as a ratio against `uniform` and `target_multiplicative` from the
same run. Runs that never reach target are counted at the horizon (this flatters the slower mixture).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
from pathlib import Path
from typing import Any

import numpy as np

from posttrain.bench.curriculum_episode import METRICS, run_episode
from posttrain.bench.curriculum_sim import (
    KIND_GUESSABLE,
    KIND_HOPELESS,
    KIND_NORMAL,
    KIND_SATURATING,
    load_sim_config,
)
from posttrain.curriculum.difficulty import DifficultyConfig

MIXTURES: dict[str, dict[str, Any]] = {
    "uniform": {"kind": "uniform"},
    "static": {"kind": "static"},
    "target_multiplicative": {"kind": "target_multiplicative"},
    "target_multiplicative_bounded": {
        "kind": "target_multiplicative",
        "shaping": {"min_weight_vs_uniform": 0.2, "max_weight_vs_uniform": 10.0},
    },
    "learnability": {"kind": "learnability"},
    "learning_progress": {"kind": "learning_progress"},
    "bandit": {"kind": "bandit"},
    "default": {"kind": "default"},
    "default+difficulty": {"kind": "default"},
}
"""Benchmarked mixtures with their default configs (`static` has no prior ratios, so it is uniform;
`target_multiplicative_bounded` is the reference rule with the default mixture's floors/ceilings;
`default+difficulty` adds level targeting inside each domain)."""
ABLATIONS: dict[str, dict[str, Any]] = {
    "default-no_cap": {"kind": "default", "shaping": {"min_weight_vs_uniform": 0.2, "max_weight_vs_uniform": 10.0,
                                                      "smoothing": 0.3, "hysteresis": 0.02}},
    "default-no_maintenance": {"kind": "default", "maintenance": 0.0, "below_target_floor": 0.0},
    "default-no_progress": {"kind": "default", "progress_bonus": 0.0, "forgetting_bonus": 0.0},
    "default-no_staleness": {"kind": "default", "staleness_bonus": 0.0},
    "default-no_learnability": {"kind": "default", "learnability_floor": 1.0},
}
"""With `--ablations`: the default with one ingredient removed (learnability: a floor of 1 swamps it)."""
WITH_DIFFICULTY = {"default+difficulty"}
"""Variants run with a `DifficultyTargeter` choosing levels inside each domain."""
KIND_NAMES = {KIND_NORMAL: "normal", KIND_SATURATING: "saturating", KIND_HOPELESS: "hopeless",
              KIND_GUESSABLE: "guessable"}


def t_quantile_975(dof: int) -> float:
    """Two-sided 95% Student t quantile (Cornish-Fisher expansion; within 1e-3 for dof >= 3)."""
    z = 1.959964
    if dof <= 0:
        return math.inf
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def summarise(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    half = t_quantile_975(arr.size - 1) * float(arr.std(ddof=1)) / math.sqrt(arr.size) if arr.size > 1 else 0.0
    return {"mean": mean, "ci95_low": mean - half, "ci95_high": mean + half}


def _job(args: tuple[str, str, int, int | None]) -> tuple[str, str, int, dict[str, float], list[Any], Any]:
    sim_name, mixture, seed, steps = args
    config = load_sim_config(sim_name)
    mixture_config = MIXTURES.get(mixture) or ABLATIONS[mixture]
    difficulty = DifficultyConfig() if mixture in WITH_DIFFICULTY else None
    result = run_episode(config, mixture_config, seed, steps, record_weights=seed == 0,
                         difficulty=difficulty)
    shares = None
    if result.weights is not None:
        shares = {KIND_NAMES[k]: result.weights[:, result.domain_kind == k].sum(axis=1).tolist()
                  for k in KIND_NAMES if (result.domain_kind == k).any()}
    curves = [result.mean_curve.tolist(), result.at_target_curve.tolist()]
    return sim_name, mixture, seed, result.metrics, curves, shares


def run_all(sims: list[str], mixtures: list[str], seeds: int, steps: int | None, workers: int) -> dict[str, Any]:
    jobs = [(s, k, seed, steps) for s in sims for k in mixtures for seed in range(seeds)]
    raw: dict[str, dict[str, dict[str, Any]]] = {s: {k: {"metrics": [], "curves": []} for k in mixtures}
                                                 for s in sims}
    if workers > 1:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            outputs = list(pool.imap_unordered(_job, jobs, chunksize=4))
    else:
        outputs = [_job(job) for job in jobs]
    for sim_name, mixture, _seed, metrics, curve, shares in sorted(outputs, key=lambda o: o[2]):
        slot = raw[sim_name][mixture]
        slot["metrics"].append(metrics)
        slot["curves"].append(curve)
        if shares is not None:
            slot["weight_shares_seed0"] = shares
    return raw


def aggregate(raw: dict[str, Any], seeds: int) -> dict[str, Any]:
    report: dict[str, Any] = {"seeds": seeds, "worlds": {}}
    for sim_name, by_mixture in raw.items():
        table = {k: {m: summarise([run[m] for run in v["metrics"]]) for m in METRICS}
                 for k, v in by_mixture.items()}
        world: dict[str, Any] = {"sim_config": load_sim_config(sim_name).model_dump(), "mixtures": table}
        for baseline in ("uniform", "target_multiplicative"):
            if baseline in table:
                base = table[baseline]["steps_to_target"]["mean"]
                world[f"steps_ratio_vs_{baseline}"] = {k: v["steps_to_target"]["mean"] / base
                                                       for k, v in table.items()}
        world["targets"] = _targets(table)
        report["worlds"][sim_name] = world
    return report


def _targets(table: dict[str, Any]) -> dict[str, Any]:
    if not {"default", "uniform", "target_multiplicative"} <= table.keys():
        return {}
    steps = {k: table[k]["steps_to_target"] for k in ("default", "uniform", "target_multiplicative")}
    ratio = steps["default"]["mean"] / steps["target_multiplicative"]["mean"]
    return {
        "steps_ratio_default_vs_target_multiplicative": ratio,
        "steps_ratio_ok (<= 0.7)": ratio <= 0.7,
        "beats_target_multiplicative_ci_disjoint": steps["default"]["ci95_high"]
        < steps["target_multiplicative"]["ci95_low"],
        "beats_uniform_ci_disjoint": steps["default"]["ci95_high"] < steps["uniform"]["ci95_low"],
        "worst_final_ge_target_multiplicative": table["default"]["worst_final_pass"]["mean"]
        >= table["target_multiplicative"]["worst_final_pass"]["mean"],
        "unlearnable_share_le_5pct": table["default"]["unlearnable_share"]["mean"] <= 0.05,
    }


def format_table(report: dict[str, Any]) -> str:
    lines = []
    for sim_name, world in report["worlds"].items():
        lines.append(f"\nworld {sim_name} ({report['seeds']} seeds; mean [95% CI])")
        lines.append(f"{'mixture':<22}" + "".join(f"{m:>26}" for m in METRICS))
        for kind, row in world["mixtures"].items():
            cells = "".join(f"{_cell(row[m]):>26}" for m in METRICS)
            lines.append(f"{kind:<22}{cells}")
        for key, value in world.get("targets", {}).items():
            lines.append(f"  {key}: {value:.3f}" if isinstance(value, float) and not isinstance(value, bool)
                         else f"  {key}: {value}")
    return "\n".join(lines)


def _cell(summary: dict[str, float]) -> str:
    return f"{summary['mean']:.3f} [{summary['ci95_low']:.3f},{summary['ci95_high']:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench curriculum", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per mixture and world")
    parser.add_argument("--steps", type=int, default=None, help="override the worlds' horizons")
    parser.add_argument("--worlds", nargs="+", default=["a", "b"], help="simulator configs (name or path)")
    parser.add_argument("--mixtures", nargs="+", default=list(MIXTURES), choices=list(MIXTURES))
    parser.add_argument("--ablations", action="store_true", help="also run the default minus each ingredient")
    parser.add_argument("--workers", type=int, default=min(2, multiprocessing.cpu_count()))
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for curriculum.json and PNGs")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNGs")
    args = parser.parse_args(argv)
    mixtures = list(args.mixtures) + (list(ABLATIONS) if args.ablations else [])
    raw = run_all(args.worlds, mixtures, args.seeds, args.steps, args.workers)
    report = aggregate(raw, args.seeds)
    report["command"] = "posttrain bench curriculum " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "curriculum.json").write_text(json.dumps(report, indent=2))
    if not args.no_plots:
        from posttrain.bench.curriculum_plots import write_plots

        report["plots"] = write_plots(raw, out)
    print(json.dumps(report, indent=2) if args.json else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
