"""A synthetic run directory with every file the report reads, written by the run's own writers where
there are some (`Outputs`: config.yaml, metrics.jsonl, eval_*.json, summary.json) and by hand after the
documented schemas otherwise (matrix.json, hacking.json, spotcheck/agreement.json).

Text that must stay text is planted where a run's own strings go: a model response, a detector message,
the config's system prompt and a domain id in the hacking report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from posttrain.curriculum import DomainStats
from posttrain.eval.evaluate import DomainEval
from posttrain.eval.stats import bootstrap_ci
from posttrain.train.config import RolloutConfig, TrainConfig
from posttrain.train.outputs import Outputs

ATTACK = "</script><script>alert(1)</script>"
"""A response that would run as a script if the report pasted it in unescaped."""
CONFIG_ATTACK = "</pre><img src=x onerror=alert(2)>"
DOMAIN_ATTACK = 'text/evil/<b onmouseover="alert(3)">x</b>'

TRAINED = ["text/strings/reverse@easy", "data/lists/sort@easy"]
UNTRAINED = ["math/arithmetic/add@easy"]
DOMAINS = TRAINED + UNTRAINED
STEPS = 6
PASSED = {  # eval label -> domain -> tasks passed out of 20
    "base": {"text/strings/reverse@easy": 4, "data/lists/sort@easy": 10, "math/arithmetic/add@easy": 16},
    "step3": {"text/strings/reverse@easy": 9, "data/lists/sort@easy": 11, "math/arithmetic/add@easy": 12},
    "final": {"text/strings/reverse@easy": 15, "data/lists/sort@easy": 10, "math/arithmetic/add@easy": 6},
}


def _eval(domain: str, passed: int, num_tasks: int = 20) -> DomainEval:
    rewards = tuple([1.0] * passed + [0.0] * (num_tasks - passed))
    low, high = bootstrap_ci(rewards)
    mean = passed / num_tasks
    return DomainEval(domain, num_tasks, mean, mean, 0, 1.0, ci_low=low, ci_high=high,
                      task_ids=tuple(f"{domain}#{i}" for i in range(num_tasks)), rewards=rewards)


def write_run_dir(run_dir: Path, optional: bool = True) -> dict[str, Any]:
    """Write the run directory; `optional` adds matrix.json, hacking.json and spotcheck/agreement.json.
    Returns the summary."""
    config = TrainConfig(steps=STEPS, rollout=RolloutConfig(system_prompt=CONFIG_ATTACK))
    outputs = Outputs(run_dir, config, DOMAINS, untrained_ids=UNTRAINED)
    for step in range(STEPS):
        stats = {d: DomainStats(n=16, mean_reward=(step + i) / (STEPS + 2), pass_rate=0.5)
                 for i, d in enumerate(TRAINED)}  # fmt: skip
        weights = {TRAINED[0]: 0.5 + 0.05 * step, TRAINED[1]: 0.5 - 0.05 * step}
        outputs.log_step(step, {"loss": 0.1}, stats, weights, {"filtered_fraction": 0.0}, infra_failures=0)
    evals = {label: {d: _eval(d, n) for d, n in passed.items()} for label, passed in PASSED.items()}
    for label, result in evals.items():
        outputs.write_eval(label, result)
    summary = outputs.write_summary(evals["base"], evals["final"], steps=STEPS)
    outputs.close()
    if optional:
        (run_dir / "matrix.json").write_text(json.dumps(matrix()))
        (run_dir / "hacking.json").write_text(json.dumps(hacking()))
        (run_dir / "spotcheck").mkdir()
        (run_dir / "spotcheck" / "agreement.json").write_text(json.dumps(agreement()))
    return summary


def _metric(value: float, low: float, high: float, n: int = 20) -> dict[str, Any]:
    return {"value": value, "ci_low": low, "ci_high": high, "n": n}


def matrix() -> dict[str, Any]:
    """matrix.json (version 1): base and final on the three domains; text has no class aggregate, so the
    report must average its cells; the gate failed on the untrained maths domain."""
    cells = []
    for label in ("base", "final"):
        for domain, passed in PASSED[label].items():
            value = passed / 20
            cells.append({"checkpoint": label, "domain_id": domain, "n": 20, "infra_errors": 0,
                          "metrics": {"reward": _metric(value, value - 0.2, value + 0.2),
                                      "pass@1": _metric(value, value - 0.2, value + 0.2)},
                          "responses": [ATTACK], "future_field": {"ignored": True}})  # fmt: skip
    aggregates = [{"checkpoint": label, "class": cls, "domains": [d], "n": 20,
                   "metrics": {"reward": _metric(value, value - 0.1, value + 0.1)}}
                  for label, cls, d, value in (("base", "math", UNTRAINED[0], 0.8), ("final", "math", UNTRAINED[0], 0.3),
                                               ("base", "data", TRAINED[1], 0.5), ("final", "data", TRAINED[1], 0.5))]  # fmt: skip
    return {
        "version": 1,
        "checkpoints": [{"label": "base", "hash": "aa", "path": "p"}, {"label": "final", "hash": "bb", "path": "q"}],
        "sampling": {"greedy": True, "tasks_per_domain": 20},
        "domains": [{"domain_id": d, "class": d.split("/")[0], "family": "/".join(d.split("/")[:2]),
                     "trained": d in TRAINED} for d in DOMAINS],  # fmt: skip
        "cells": cells,
        "aggregates": {"family": [], "class": aggregates},
        "gate": {"base": "base", "margin": 0.02, "metric": "reward", "passed": False, "checkpoints": [
            {"checkpoint": "final", "passed": False, "offenders": [UNTRAINED[0], "class math"],
             "domains": [{"name": UNTRAINED[0], "n": 20, "base": 0.8, "checkpoint": 0.3, "delta": -0.5,
                          "ci_low": -0.7, "ci_high": -0.3, "p_value": 0.002, "regressed": True}],
             "classes": [{"name": "math", "n": 20, "base": 0.8, "checkpoint": 0.3, "delta": -0.5,
                          "ci_low": -0.7, "ci_high": -0.3, "p_value": 0.002, "regressed": True}]}]},
    }


def hacking() -> dict[str, Any]:
    return {"version": 1, "fired": 1, "alarms": [
        {"detector": "length_spike", "domain_id": TRAINED[0], "fired": True, "value": 3.5, "threshold": 2.0,
         "message": "responses grew <3.5x> while reward rose", "examples": [
             {"response": ATTACK, "reward": 1.0, "step": 5},
             {"response": "x" * 5000, "reward": 1.0, "step": 6}]},
        {"detector": "format_only", "domain_id": DOMAIN_ATTACK, "fired": False, "value": 0.1, "threshold": 0.5,
         "message": "ok", "examples": []},
    ]}


def agreement() -> dict[str, Any]:
    return {"domains": {TRAINED[0]: {"n": 40, "agreement": 0.925, "ci_low": 0.85, "ci_high": 1.0},
                        TRAINED[1]: {"n": 40, "agreement": None, "ci_low": None, "ci_high": None}},
            "overall": {"n": 80, "agreement": 0.8625, "ci_low": 0.77, "ci_high": 0.92, "reviewers": 2}}
