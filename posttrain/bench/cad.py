"""`posttrain bench cad`: what grading an OpenSCAD response costs, against running OpenSCAD directly.

Workload: `--tasks` tasks of each `3d/openscad/*` domain (18 domains), each answered by its reference
program and by the reference moved 1 mm along x (as much geometry to render; it fails on small parts
and passes where 1 mm is within the tolerances of a large one). The
references are rendered once first (the verifier caches them per task, as a GRPO group would), so the
timings are per graded response.
- Sequential, one response at a time, median ms of each stage: OpenSCAD run directly on the host
  (`openscad ... -o -` in a subprocess, no isolation: the baseline), the same run through the verifier's
  sandbox pool, reading the STL into a checked solid (`read_stl` + `load_solid`: trimesh, the ray
  winding check) and comparing it with the reference (IoU and void share, manifold3d).
- Batch: `CadGeometryVerifier.score_many` over every response with `--workers` sandboxes, against the
  direct runs `--workers` at a time, alternating for `--rounds` rounds; responses/s of each (median)
  and their ratio, direct / ours in time (the price of the sandbox and of the geometry checks together).
Also the pass rate of each variant (references must be 1.0), infra scores (must be 0) and direct runs
that produced no STL (must be 0). Only
reference programs, which this package wrote, run outside the sandbox. Writes `DIR/cad.json`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.sandbox.background import run_blocking
from posttrain.sandbox.host import host_features
from posttrain.tasks.families.cad import CadConfig, CadFamily, fenced
from posttrain.types import Task
from posttrain.verify.cad import OPENSCAD, POOL_SIZE, PROGRAM_FILE, CadGeometryVerifier
from posttrain.verify.cad_mesh import iou, load_solid, read_stl, void_recall
from posttrain.verify.cad_program import extract_program
from posttrain.verify.configs import CadGeometryConfig


def workload(tasks_per_domain: int, families: list[str] | None = None, seed: int = 0) -> list[tuple[str, Task, str]]:
    """(variant, task, response): each task's reference and the reference moved 1 mm along x."""
    family = CadFamily(CadConfig(**({"families": families} if families else {})))
    tasks = [family.task(spec, i, seed) for spec in family.domains() for i in range(tasks_per_domain)]
    moved = [("moved", t, fenced(f"translate([1, 0, 0]) {{\n{t.gold['reference']}\n}}")) for t in tasks]
    return [("reference", t, t.answer or "") for t in tasks] + moved


def direct_stl(program: str, folder: Path, name: str) -> tuple[float, bytes]:
    """Seconds and STL of one OpenSCAD run on the host, no sandbox (trusted reference programs only)."""
    path = folder / f"{name}.scad"
    path.write_text(program)
    start = time.perf_counter()
    done = subprocess.run([*OPENSCAD[:-1], str(path)], capture_output=True, check=False, timeout=600)
    return time.perf_counter() - start, done.stdout


def sequential_ms(verifier: CadGeometryVerifier, items: list[tuple[str, Task, str]], folder: Path) -> dict[str, float]:
    """Median milliseconds per response of each stage, one response at a time."""
    stages: dict[str, list[float]] = {"openscad_direct": [], "openscad_sandboxed": [], "load_solid": [], "compare": []}
    pool = run_blocking(verifier._pool.get(), 120)
    for index, (_, task, response) in enumerate(items):
        program = extract_program(response)
        seconds, _ = direct_stl(program, folder, f"seq{index}")
        stages["openscad_direct"].append(seconds)
        start = time.perf_counter()
        result = run_blocking(pool.run(OPENSCAD, files={PROGRAM_FILE: program}), 600)
        stages["openscad_sandboxed"].append(time.perf_counter() - start)
        start = time.perf_counter()
        solid = load_solid(read_stl(result.stdout))
        stages["load_solid"].append(time.perf_counter() - start)
        reference = load_solid(read_stl(direct_stl(task.gold["reference"], folder, f"ref{index}")[1]))
        start = time.perf_counter()
        iou(solid, reference)
        void_recall(solid, reference)
        stages["compare"].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(values) for name, values in stages.items()}


def direct_batch(items: list[tuple[str, Task, str]], workers: int, folder: Path) -> tuple[float, list[bytes]]:
    """Seconds to render every response directly, `workers` at a time, and the STLs."""
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        stls = list(threads.map(lambda item: direct_stl(extract_program(item[1][2]), folder, f"batch{item[0]}")[1],
                                enumerate(items)))  # fmt: skip
    return time.perf_counter() - start, stls


def run_bench(tasks_per_domain: int, workers: int, sequential: int, rounds: int,
              families: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    items = workload(tasks_per_domain, families)
    verifier = CadGeometryVerifier(CadGeometryConfig(), pool_size=workers)
    ours_s: list[float] = []
    direct_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cad-bench-") as tmp:
        folder = Path(tmp)
        try:
            verifier.score_many([(task, task.answer or "") for name, task, _ in items if name == "reference"])
            for _ in range(rounds):  # alternating, so load from other processes hits both
                start = time.perf_counter()
                scores = verifier.score_many([(task, response) for _, task, response in items])
                ours_s.append(time.perf_counter() - start)
                seconds, stls = direct_batch(items, workers, folder)
                direct_s.append(seconds)
            stride = max(1, len(items) // max(1, sequential))
            stages = sequential_ms(verifier, items[::stride][:sequential], folder)
        finally:
            verifier.close()
    variants = sorted({name for name, _, _ in items})
    passed = {v: [s.passed for (name, _, _), s in zip(items, scores, strict=True) if name == v] for v in variants}
    ours, direct = statistics.median(ours_s), statistics.median(direct_s)
    return {
        "workload": {"responses": len(items), "tasks_per_domain": tasks_per_domain, "variants": variants,
                     "domains": sorted({task.domain_id for _, task, _ in items}),
                     "sequential_sample": sequential, "rounds": rounds},  # fmt: skip
        "host": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "workers": workers},
        "sequential_ms": stages,
        "sandbox_overhead_ratio": stages["openscad_sandboxed"] / stages["openscad_direct"],
        "graded_ms_per_response": stages["openscad_sandboxed"] + stages["load_solid"] + stages["compare"],
        "batch": {"ours_seconds": ours_s, "direct_seconds": direct_s, "ours_responses_per_s": len(items) / ours,
                  "direct_responses_per_s": len(items) / direct, "ratio": direct / ours,
                  "ratio_of_best_rounds": min(direct_s) / min(ours_s)},  # fmt: skip
        "pass_rate": {v: sum(p) / len(p) for v, p in passed.items()},
        "infra_scores": sum(s.is_infra_failure for s in scores),
        "direct_runs_without_stl": sum(not stl for stl in stls),
    }


def show(report: dict[str, Any]) -> None:
    work, host, ms = report["workload"], report["host"], report["sequential_ms"]
    print(f"cad grading: {work['responses']} responses, {host['cpus']} CPUs, load {host['load_average'][0]:.1f}, "
          f"{host['workers']} workers")  # fmt: skip
    print("  sequential, median ms per response: " + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))
    print(f"  graded (sandboxed run + solid + comparison) {report['graded_ms_per_response']:.1f} ms; sandboxed / direct "
          f"run {report['sandbox_overhead_ratio']:.2f}")  # fmt: skip
    batch = report["batch"]
    print(f"  batch: ours {batch['ours_responses_per_s']:.1f} responses/s, direct openscad "
          f"{batch['direct_responses_per_s']:.1f} responses/s, ratio {batch['ratio']:.2f} (best rounds "
          f"{batch['ratio_of_best_rounds']:.2f})")  # fmt: skip
    print(f"  pass rate {report['pass_rate']}, infra scores {report['infra_scores']}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench cad", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for cad.json")
    parser.add_argument("--tasks", type=int, default=2, help="tasks per domain")
    parser.add_argument("--workers", type=int, default=POOL_SIZE, help="sandboxes, and direct runs at once")
    parser.add_argument("--sequential", type=int, default=18, help="responses timed one by one, per stage")
    parser.add_argument("--rounds", type=int, default=2, help="alternating batch rounds of both")
    parser.add_argument("--families", nargs="*", help="only these cad families (default: all six)")
    args = parser.parse_args(argv)
    if not host_features().bwrap_usable or shutil.which("openscad") is None:
        print("cad benchmark skipped: needs bubblewrap and openscad")
        return 0
    report = run_bench(args.tasks, args.workers, args.sequential, args.rounds, args.families)
    emit_report(report, args.out, "cad.json", args.json, show)
    return 0
