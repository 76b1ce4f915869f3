"""Learning benchmark: does RL on the true reward raise held-out reward, on several seeds, against a control?

`posttrain bench learning [--config quickstart] [--seeds 0,1,2] [--no-control] [--jobs N] [--set KEY=VALUE ...]`
runs `posttrain train CONFIG --set seed=N` once per seed and once with `--set reward.mode=random` (the
control: same config, coin-flip rewards), each in its own process exactly as a user would (`--jobs N`
runs N of them at a time: with the preset's one torch thread each, a run's numbers do not depend on
what runs beside it, only its wall time does), then writes
`learning.json`: every run's summary (per domain base and trained reward with intervals, paired delta,
p-value, verdict; trained and untrained means; the base model's hash) and the acceptance checks below.

Checks on each true-reward seed (greedy held-out pass rate, trained domains):
- `improved_fraction`: at least 75% of the trained domains have a positive delta;
- `significant`: at least half of the trained domains are `improved` at 95% (paired test);
- `mean_gain`: the mean paired delta over trained domains is at least +10 points;
- `no_regression`: no trained domain is `regressed`;
- `beats_control` (with a control): the seed's final held-out reward against the control's final on
  the same tasks, paired and averaged over the trained domains like `mean_delta`, has its 95% interval
  above 0 (`vs_control` in the report). A gain the control also shows (drift that any update gives,
  or the warm start's shape) does not count.
- `seeds_beat_control` (two or more seeds and a control): the same comparison with each task's final
  reward averaged over the seeds (`seeds_vs_control`): whether the seeds' gain beyond the control holds
  in aggregate, where one seed's interval is too wide to say.
Check on the control: `control_flat`: its mean delta is within +-2 points or its interval contains 0.
The untrained domains' drops (more than 2 points with the interval below 0) are listed, not failed.
Runs with agent domains also report, pooled over the trained agent domains, the greedy held-out success
rate and recovery rate (errored episodes that still succeeded) before and after with 95% Wilson
intervals, and the change with its 95% interval (`success_delta`, `recovery_delta`: change, low, high;
Newcombe's interval for two independent proportions); the checks `agent_success_separated` and
`agent_recovery_separated` (each seed) ask for the stricter: the final interval wholly above the base one.
Success is also compared task by task (`success_paired`: the same held-out tasks before and after, paired
bootstrap interval and McNemar's p; check `agent_success_paired_up`: the interval above 0).

`--sampled N` (N > 0) then evaluates the base model, every seed's final checkpoint and the control in one
`posttrain eval` matrix (`--sampled-tasks` held-out tasks per domain, N sampled responses each at the
config's rollout temperature; `OUT/learning-matrix/matrix.json`) and keeps each run's paired change
against the base per class (`sampled`: `pass@1`, `pass@1_sampled`, `recovery_sampled`; tasks resampled
within every domain, `posttrain.eval.stats.paired_ratio_change`). Checks: `sampled_pass_up` and, for
classes with errored episodes, `sampled_recovery_up` (each seed: the interval above 0);
`control_sampled_flat` (the control's `pass@1_sampled` change within +-2 points or its interval holds 0).
The matrix's base is the config's base model (`--set` overrides are not applied to it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report

MIN_IMPROVED_FRACTION = 0.75
MIN_SIGNIFICANT_FRACTION = 0.5
MIN_MEAN_GAIN = 0.10
CONTROL_BAND = 0.02


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="posttrain bench learning", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="quickstart", help="YAML path or preset name")
    parser.add_argument("--seeds", default="0,1,2", help="RL seeds (the base model does not depend on them)")
    parser.add_argument("--no-control", action="store_true", help="skip the random-reward control run")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override for every run")
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time")
    parser.add_argument("--sampled", type=int, default=0, metavar="N",
                        help="then a sampled matrix of base, seeds and control: N samples per task (0: off)")
    parser.add_argument("--sampled-tasks", type=int, default=64, help="held-out tasks per domain of that matrix")
    parser.add_argument("--runs", type=Path, default=None, help="run folders (default OUT/learning-runs)")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    return parser.parse_args(argv)


def run_training(config: str, run_dir: Path, overrides: list[str]) -> tuple[dict[str, Any], float]:
    """One `posttrain train` in a fresh process; its summary.json and wall seconds."""
    command = [sys.executable, "-m", "posttrain.cli", "train", config, "--run-dir", str(run_dir)]
    for item in overrides:
        command += ["--set", item]
    print(f"[bench learning] posttrain {' '.join(command[3:])}", file=sys.stderr, flush=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return json.loads((run_dir / "summary.json").read_text()), wall


SAMPLED_METRICS = ("pass@1", "pass@1_sampled", "recovery_sampled")


def sampled_matrix(config: str, runs: dict[str, Path], out: Path, samples: int, tasks: int) -> dict[str, Any]:
    """`posttrain eval` of the base model and every run's final checkpoint with `samples` sampled responses
    per task; per run label, class and `SAMPLED_METRICS` metric, its paired change against the base."""
    from posttrain.train.config import load_train_config

    temperature = load_train_config(config).rollout.temperature
    command = [sys.executable, "-m", "posttrain.cli", "eval", "--checkpoints", f"base={config}",
               *(f"{label}={path}" for label, path in runs.items()), "--domains", config, "--out", str(out),
               "--tasks-per-domain", str(tasks), "--samples-per-task", str(samples),
               "--temperature", str(temperature)]  # fmt: skip
    print(f"[bench learning] posttrain {' '.join(command[3:])}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL)
    doc = json.loads((out / "matrix.json").read_text())
    return {"command": "posttrain " + " ".join(command[3:]), "changes": changes_by_run(doc)}


def changes_by_run(doc: dict[str, Any]) -> dict[str, Any]:
    """A matrix document's `changes`, as run label -> class -> `SAMPLED_METRICS` metric -> change."""
    changes: dict[str, Any] = {}
    for row in doc.get("changes", {}).get("classes", ()):
        kept = {m: v for m, v in row["metrics"].items() if m in SAMPLED_METRICS}
        changes.setdefault(row["checkpoint"], {})[row["class"]] = kept
    return changes


def sampled_checks(changes: dict[str, Any]) -> dict[str, bool]:
    """A seed's sampled checks (module docstring) over every class of its matrix row."""
    def up(metric: str) -> bool:
        rows = [c[metric] for c in changes.values() if c.get(metric) and c[metric]["ci_low"] is not None]
        return bool(rows) and all(r["ci_low"] > 0 for r in rows)

    out = {"sampled_pass_up": up("pass@1_sampled")}
    if any("recovery_sampled" in c for c in changes.values()):
        out["sampled_recovery_up"] = up("recovery_sampled")
    return out


def control_sampled_flat(changes: dict[str, Any]) -> bool:
    """The control's sampled pass rate changed by at most `CONTROL_BAND` or its interval holds 0."""
    rows = [c["pass@1_sampled"] for c in changes.values() if c.get("pass@1_sampled")]
    return all(abs(r["delta"]) <= CONTROL_BAND or (r["ci_low"] or 0.0) <= 0.0 <= (r["ci_high"] or 0.0) for r in rows)


def seed_checks(summary: dict[str, Any]) -> dict[str, bool]:
    """The acceptance checks of one true-reward run (see the module docstring)."""
    trained = [d for d in summary["domains"].values() if d.get("trained", True)]
    n = max(len(trained), 1)
    improved = sum(d["delta_reward"] > 0 for d in trained)
    significant = sum(d["verdict"] == "improved" for d in trained)
    return {
        "improved_fraction": improved / n >= MIN_IMPROVED_FRACTION,
        "significant": significant >= math.ceil(MIN_SIGNIFICANT_FRACTION * n),
        "mean_gain": summary["mean_delta"]["delta"] >= MIN_MEAN_GAIN,
        "no_regression": all(d["verdict"] != "regressed" for d in trained),
    }


def control_check(summary: dict[str, Any]) -> bool:
    """The control shows no gain: mean delta within +-2 points, or an interval that contains 0."""
    mean = summary["mean_delta"]
    return abs(mean["delta"]) <= CONTROL_BAND or mean["ci_low"] <= 0.0 <= mean["ci_high"]


def wilson(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (0, 0 for n = 0)."""
    if n <= 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def newcombe(p1: float, ci1: tuple[float, float], p2: float, ci2: tuple[float, float]) -> tuple[float, float]:
    """95% interval of `p2 - p1` for two independent proportions from their Wilson intervals (Newcombe 1998,
    method 10): wider than a normal interval near 0 and 1, narrower than requiring the two to be apart."""
    low = p2 - p1 - math.sqrt((p2 - ci2[0]) ** 2 + (ci1[1] - p1) ** 2)
    high = p2 - p1 + math.sqrt((ci2[1] - p2) ** 2 + (p1 - ci1[0]) ** 2)
    return low, high


def pooled_agent(eval_doc: dict[str, Any], domains: list[str]) -> dict[str, Any] | None:
    """Success and recovery pooled over `domains`' agent metrics in one eval file (None: no agent domain)."""
    rows = [eval_doc[d]["agent"] for d in domains if eval_doc.get(d, {}).get("agent")]
    if not rows:
        return None
    episodes = sum(r.get("episodes", 0) for r in rows)
    passed = sum(r.get("success_rate", 0.0) * r.get("episodes", 0) for r in rows)
    errored = sum(r.get("errored_episodes", 0) for r in rows)
    recovered = sum(r.get("recovery_rate", 0.0) * r.get("errored_episodes", 0) for r in rows)
    return {"episodes": episodes, "success_rate": passed / max(episodes, 1), "success_ci": wilson(passed, episodes),
            "errored_episodes": errored, "recovery_rate": recovered / max(errored, 1),
            "recovery_ci": wilson(recovered, errored)}  # fmt: skip


def rewards_by_task(doc: dict[str, Any], domain: str) -> dict[str, float]:
    """Task id -> reward of one domain in an `eval_*.json` document (empty when the domain is absent)."""
    entry = doc.get(domain, {})
    return dict(zip(entry.get("task_ids", ()), entry.get("rewards", ()), strict=True))


def paired_success(base_doc: dict[str, Any], final_doc: dict[str, Any], domains: list[str]) -> dict[str, Any]:
    """Success (an episode's reward of 1) of the same held-out tasks before and after, pooled over the
    agent `domains`: the mean change with its paired bootstrap 95% interval and McNemar's p-value
    (`posttrain.eval.stats.paired`), and the tasks that flipped each way."""
    from posttrain.eval.stats import paired

    before: list[float] = []
    after: list[float] = []
    for domain in domains:
        if not base_doc.get(domain, {}).get("agent"):
            continue
        old, new = rewards_by_task(base_doc, domain), rewards_by_task(final_doc, domain)
        for task in sorted(old.keys() & new.keys()):
            before.append(float(old[task] >= 1.0))
            after.append(float(new[task] >= 1.0))
    result = paired(before, after)
    gained = sum(1 for b, a in zip(before, after, strict=True) if a > b)
    lost = sum(1 for b, a in zip(before, after, strict=True) if a < b)
    return {"delta": result.delta, "ci": [result.ci_low, result.ci_high], "p_value": result.p_value,
            "tasks": result.n, "gained": gained, "lost": lost}


def agent_report(run_dir: Path, summary: dict[str, Any]) -> dict[str, Any] | None:
    """Base and final pooled agent metrics of a run, whether the final intervals clear the base ones, and
    the paired change of success on the same tasks (`paired_success`)."""
    trained = [d for d, v in summary["domains"].items() if v.get("trained", True)]
    try:
        base_doc = json.loads((run_dir / "eval_base.json").read_text())
        final_doc = json.loads((run_dir / "eval_final.json").read_text())
    except (OSError, ValueError):
        return None
    base, final = pooled_agent(base_doc, trained), pooled_agent(final_doc, trained)
    if base is None or final is None:
        return None
    deltas = {f"{name}_delta": (final[f"{name}_rate"] - base[f"{name}_rate"],
                                *newcombe(base[f"{name}_rate"], base[f"{name}_ci"], final[f"{name}_rate"],
                                          final[f"{name}_ci"])) for name in ("success", "recovery")}  # fmt: skip
    return {"base": base, "final": final, **deltas, "success_paired": paired_success(base_doc, final_doc, trained),
            "success_separated": final["success_ci"][0] > base["success_ci"][1],
            "recovery_separated": final["recovery_ci"][0] > base["recovery_ci"][1]}  # fmt: skip


def versus_control(run_dirs: list[Path], control_dir: Path, domains: list[str]) -> dict[str, Any] | None:
    """True-reward runs' final held-out reward against the random-reward control's final reward on
    the same tasks: per task the mean over `run_dirs` (one seed, or every seed pooled), then the mean
    over `domains` of each domain's paired change, its bootstrap 95% interval and p
    (`posttrain.eval.stats.paired_mean_of_domains`, as a run's own `mean_delta` against its base).
    None when a run has no `eval_final.json`."""
    from posttrain.eval.stats import paired_mean_of_domains

    try:
        finals = [json.loads((run_dir / "eval_final.json").read_text()) for run_dir in run_dirs]
        control = json.loads((control_dir / "eval_final.json").read_text())
    except (OSError, ValueError):
        return None
    pairs = []
    for domain in domains:
        theirs = rewards_by_task(control, domain)
        ours = [rewards_by_task(final, domain) for final in finals]
        tasks = sorted(set(theirs).intersection(*ours))
        pairs.append(([float(theirs[t]) for t in tasks],
                      [sum(float(run[t]) for run in ours) / len(ours) for t in tasks]))
    result = paired_mean_of_domains(pairs)
    if result.n == 0:
        return None
    return {"delta": result.delta, "ci": [result.ci_low, result.ci_high], "p_value": result.p_value, "tasks": result.n}


def condense(summary: dict[str, Any], wall_s: float, run_dir: Path | None = None) -> dict[str, Any]:
    """The numbers of one run that the report keeps."""
    domains = {
        domain_id: {
            "trained": d.get("trained", True), "base": d["base"], "final": d["final"],
            "delta": d["delta_reward"], "delta_ci": d["delta_ci"], "p_value": d["p_value"],
            "verdict": d["verdict"], **({"dropped": d["dropped"]} if "dropped" in d else {}),
        }
        for domain_id, d in summary["domains"].items()
    }
    keep = ("seed", "steps", "base_model_sha256", "headline", "num_domains", "mean_base_reward",
            "mean_final_reward", "mean_delta", "domains_improved", "domains_regressed",
            "domains_improved_significantly", "domains_regressed_significantly", "untrained")
    out = {**{k: summary[k] for k in keep if k in summary}, "wall_s": round(wall_s, 1), "domains": domains}
    agent = agent_report(run_dir, summary) if run_dir is not None else None
    if agent is not None:
        out["agent"] = agent
    return out


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    runs_root = args.runs or Path(args.out) / "learning-runs"
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    report: dict[str, Any] = {
        "command": "posttrain bench learning " + " ".join(argv), "config": args.config,
        "overrides": args.overrides, "cpus": os.cpu_count(), "seeds": {}, "checks": {},
    }
    start = time.perf_counter()
    runs = {f"seed{seed}": [*args.overrides, f"seed={seed}"] for seed in seeds}
    if not args.no_control:
        runs["control"] = [*args.overrides, f"seed={seeds[0] if seeds else 0}", "reward.mode=random"]
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futures = {name: pool.submit(run_training, args.config, runs_root / name, o) for name, o in runs.items()}
        results = {name: future.result() for name, future in futures.items()}
    for seed in seeds:
        summary, wall = results[f"seed{seed}"]
        report["seeds"][str(seed)] = condense(summary, wall, runs_root / f"seed{seed}")
        report["checks"][f"seed{seed}"] = seed_checks(summary)
        agent = report["seeds"][str(seed)].get("agent")
        if agent is not None:
            report["checks"][f"seed{seed}"].update({"agent_success_separated": agent["success_separated"],
                                                    "agent_success_paired_up": agent["success_paired"]["ci"][0] > 0,
                                                    "agent_recovery_separated": agent["recovery_separated"]})  # fmt: skip
    if "control" in results:
        summary, wall = results["control"]
        report["control"] = condense(summary, wall, runs_root / "control")
        report["checks"]["control_flat"] = control_check(summary)
        trained: list[str] = []
        for seed in seeds:
            trained = [d for d, v in results[f"seed{seed}"][0]["domains"].items() if v.get("trained", True)]
            versus = versus_control([runs_root / f"seed{seed}"], runs_root / "control", trained)
            if versus is not None:
                report["seeds"][str(seed)]["vs_control"] = versus
                report["checks"][f"seed{seed}"]["beats_control"] = versus["ci"][0] > 0
        if len(seeds) > 1:
            pooled = versus_control([runs_root / f"seed{seed}" for seed in seeds], runs_root / "control", trained)
            if pooled is not None:
                report["seeds_vs_control"] = pooled
                report["checks"]["seeds_beat_control"] = pooled["ci"][0] > 0
    if args.sampled > 0:
        matrix = sampled_matrix(args.config, {name: runs_root / name for name in runs}, Path(args.out) / "learning-matrix",
                                args.sampled, args.sampled_tasks)  # fmt: skip
        report["sampled"] = matrix
        for seed in seeds:
            report["checks"][f"seed{seed}"].update(sampled_checks(matrix["changes"].get(f"seed{seed}", {})))
        if "control" in matrix["changes"]:
            report["checks"]["control_sampled_flat"] = control_sampled_flat(matrix["changes"]["control"])
    report["total_wall_s"] = round(time.perf_counter() - start, 1)
    report["passed"] = all(v if isinstance(v, bool) else all(v.values()) for v in report["checks"].values())
    emit_report(report, args.out, "learning.json", args.json, _print_table)
    return 0


def _print_table(report: dict[str, Any]) -> None:
    rows = [(f"seed {k}", v) for k, v in report["seeds"].items()]
    if "control" in report:
        rows.append(("random-reward control", report["control"]))
    for label, run in rows:
        print(f"{label:22s} {run['headline']}  ({run['wall_s']:.0f} s)")
        if "vs_control" in run:
            vc = run["vs_control"]
            print(f"{'':22s} against the control on the same {vc['tasks']} tasks: {vc['delta'] * 100:+.1f} pts "
                  f"[{vc['ci'][0] * 100:+.1f}, {vc['ci'][1] * 100:+.1f}], p {vc['p_value']:.3g}")
        if "agent" in run:
            b, f = run["agent"]["base"], run["agent"]["final"]
            ds, dr = run["agent"]["success_delta"], run["agent"]["recovery_delta"]
            print(f"{'':22s} agent success {b['success_rate']:.3f} -> {f['success_rate']:.3f} "
                  f"({ds[0]:+.3f} [{ds[1]:+.3f}, {ds[2]:+.3f}]), recovery {b['recovery_rate']:.3f} -> "
                  f"{f['recovery_rate']:.3f} ({dr[0]:+.3f} [{dr[1]:+.3f}, {dr[2]:+.3f}]; "
                  f"{f['errored_episodes']} errored episodes)")
            sp = run["agent"]["success_paired"]
            print(f"{'':22s} success paired on {sp['tasks']} tasks {sp['delta']:+.3f} [{sp['ci'][0]:+.3f}, "
                  f"{sp['ci'][1]:+.3f}], p {sp['p_value']:.3g} ({sp['gained']} gained, {sp['lost']} lost)")
    if "seeds_vs_control" in report:
        vc = report["seeds_vs_control"]
        print(f"{'seeds pooled':22s} against the control on the same {vc['tasks']} tasks: {vc['delta'] * 100:+.1f} pts "
              f"[{vc['ci'][0] * 100:+.1f}, {vc['ci'][1] * 100:+.1f}], p {vc['p_value']:.3g}")
    for label, classes in report.get("sampled", {}).get("changes", {}).items():
        for cls, metrics in classes.items():
            text = ", ".join(f"{m} {v['delta']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]"
                             for m, v in metrics.items() if v["ci_low"] is not None)  # fmt: skip
            print(f"{'sampled ' + label:22s} {cls}: {text}")
    for name, check in report["checks"].items():
        print(f"{name:22s} {check}")
    print(f"passed: {report['passed']}")
