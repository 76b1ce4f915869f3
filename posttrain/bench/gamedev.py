"""`posttrain bench gamedev`: what grading a gamedev response costs, against plain `code_tests` in the same run.

Workload: `--tasks` tasks of every gamedev domain. Play domains (`gamedev_play`: logic and physics) get
three responses each: the gold answer, one that returns its input unchanged, and garbage; level domains
(`gamedev_level`) get the gold level and garbage. Baseline: the gold answers of as many procedural code
tasks (`code/function/<family>@easy`), graded by `CodeTestsVerifier` with the same pool size: one
sandboxed run each, a handful of asserts, so the ratio is the price of the play-throughs. Graders and
baseline alternate for `--rounds` rounds; medians reported.

Reported: ms per graded response for the baseline, for `gamedev_play` (all, and per game: grid, motion,
launch) and for `gamedev_level`, each as a ratio to the baseline; the pass rate of every variant (gold
must be 1, the rest 0); infra scores (must be 0). Writes `DIR/gamedev.json`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.sandbox.host import host_features
from posttrain.tasks.families.code import CodeConfig, CodeFamily
from posttrain.tasks.families.gamedev import GameDevConfig, GameDevFamily
from posttrain.tasks.validate import GARBAGE_RESPONSE
from posttrain.types import Score, Task
from posttrain.verify.code import POOL_SIZE, CodeTestsVerifier
from posttrain.verify.configs import CodeTestsConfig, GameLevelConfig, GamePlayConfig
from posttrain.verify.gamedev.levels import GameLevelVerifier
from posttrain.verify.gamedev.play import GamePlayVerifier

IDENTITY = {"step": "def step(state, action):\n    return state", "update": "def update(body, world):\n    return body",
            "launch": "def launch(target):\n    return target"}  # fmt: skip
"""A response that returns its input, per entry point."""
Item = tuple[str, str, Task, str]
"""(game or "level", variant, task, response)."""


def workload(tasks_per_domain: int) -> tuple[list[Item], list[Item], list[tuple[Task, str]]]:
    """(play items, level items, baseline code items)."""
    family = GameDevFamily(GameDevConfig())
    play: list[Item] = []
    level: list[Item] = []
    for domain in family.domains():
        for index in range(tasks_per_domain):
            task = family.task(domain, index, 0)
            assert isinstance(task.gold, dict) and task.answer is not None
            if domain.verifier == "gamedev_level":
                level += [("level", "gold", task, task.answer), ("level", "garbage", task, GARBAGE_RESPONSE)]
                continue
            game, entry = task.gold["game"], task.gold["entry_point"]
            play += [(game, "gold", task, task.answer), (game, "identity", task, f"```python\n{IDENTITY[entry]}\n```"),
                     (game, "garbage", task, GARBAGE_RESPONSE)]  # fmt: skip
    code = CodeFamily(CodeConfig(levels=["easy"], humaneval=False, canary=False))
    domains = list(code.domains())
    baseline = [code.task(domains[i % len(domains)], i, 0) for i in range(len(play))]
    return play, level, [(t, t.answer or "") for t in baseline]


def timed(grade: Any, items: list[Any]) -> tuple[float, list[Score]]:
    start = time.perf_counter()
    scores = grade(items)
    return time.perf_counter() - start, scores


def pass_rates(items: list[Item], scores: list[Score]) -> dict[str, float]:
    rates: dict[str, list[bool]] = {}
    for (_, variant, _, _), score in zip(items, scores, strict=True):
        rates.setdefault(variant, []).append(score.passed)
    return {name: sum(oks) / len(oks) for name, oks in rates.items()}


def per_game_ms(items: list[Item], workers: int, rounds: int) -> dict[str, float]:
    """ms per response of each game graded alone (a batch of its own)."""
    verifier = GamePlayVerifier(GamePlayConfig(), pool_size=workers)
    try:
        verifier.score_many([(items[0][2], items[0][3])])
        out = {}
        for game in sorted({item[0] for item in items}):
            mine = [(t, r) for g, _, t, r in items if g == game]
            out[game] = 1000 * statistics.median(timed(verifier.score_many, mine)[0] for _ in range(rounds)) / len(mine)
        return out
    finally:
        verifier.close()


def run_bench(tasks_per_domain: int, rounds: int, workers: int) -> dict[str, Any]:
    play, level, baseline = workload(tasks_per_domain)
    played = GamePlayVerifier(GamePlayConfig(), pool_size=workers)
    code = CodeTestsVerifier(CodeTestsConfig(), pool_size=workers)
    levels = GameLevelVerifier(GameLevelConfig())
    seconds: dict[str, list[float]] = {"baseline": [], "play": [], "level": []}
    try:
        played.score_many([(play[0][2], play[0][3])])  # start both pools outside the timings
        code.score_many(baseline[:1])
        for _ in range(rounds):
            seconds["baseline"].append(timed(code.score_many, baseline)[0])
            spent, play_scores = timed(played.score_many, [(t, r) for _, _, t, r in play])
            seconds["play"].append(spent)
            spent, level_scores = timed(lambda items: [levels.score(t, r) for t, r in items], [(t, r) for _, _, t, r in level])
            seconds["level"].append(spent)
    finally:
        played.close()
        code.close()
    counts = {"baseline": len(baseline), "play": len(play), "level": len(level)}
    ms = {name: 1000 * statistics.median(s) / counts[name] for name, s in seconds.items()}
    games = per_game_ms(play, workers, rounds)
    play_rates, level_rates = pass_rates(play, play_scores), pass_rates(level, level_scores)
    infra = sum(s.is_infra_failure for s in play_scores + level_scores)
    return {
        "workload": {"tasks_per_domain": tasks_per_domain, "responses": counts, "rounds": rounds},
        "host": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "pool_size": workers},
        "ms_per_response": {**ms, **{f"play_{game}": value for game, value in games.items()}},
        "ratio_to_baseline": {name: value / ms["baseline"] for name, value in
                              {**ms, **{f"play_{g}": v for g, v in games.items()}}.items() if name != "baseline"},
        "pass_rate": {"play": play_rates, "level": level_rates},
        "infra_scores": infra,
        "checks": {"gold all pass": play_rates["gold"] == level_rates["gold"] == 1.0,
                   "nothing else passes": not any(r for n, r in {**play_rates, **level_rates}.items() if n != "gold"),
                   "no infra scores": infra == 0},
    }  # fmt: skip


def show(report: dict[str, Any]) -> None:
    work, host = report["workload"], report["host"]
    print(f"gamedev grading: {work['responses']} responses, {host['cpus']} CPUs, load {host['load_average'][0]:.1f}, "
          f"{host['pool_size']} sandboxes")
    for name, ms in report["ms_per_response"].items():
        ratio = report["ratio_to_baseline"].get(name)
        print(f"  {name:<14} {ms:8.1f} ms/response" + (f"   {ratio:5.2f}x code_tests" if ratio else ""))
    for group, rates in report["pass_rate"].items():
        print(f"  {group:<6} pass rate " + ", ".join(f"{k} {v:.2f}" for k, v in rates.items()))
    for name, met in report["checks"].items():
        print(f"  {name:<24} {'met' if met else 'MISSED'}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench gamedev", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for gamedev.json")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per gamedev domain")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of baseline and gamedev")
    parser.add_argument("--workers", type=int, default=POOL_SIZE, help="sandboxes per verifier")
    args = parser.parse_args(argv)
    if not host_features().bwrap_usable:
        print("gamedev benchmark skipped: bubblewrap is not usable on this host")
        return 0
    report = run_bench(args.tasks, args.rounds, args.workers)
    emit_report(report, args.out, "gamedev.json", args.json, show)
    return 0 if all(report["checks"].values()) else 1
