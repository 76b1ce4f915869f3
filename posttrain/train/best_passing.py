"""The trainer's regression gate: at each evaluation, gate against the base evaluation; keep the best
checkpoint that passes.

With `eval.gate.enabled`, every evaluation after the base one is compared with it by
`posttrain.eval.gate.gate` (suite: `eval.gate.suite`, or the run's untrained domains plus the general
ones) and written to `gate_<label>.json`. A passing evaluation whose mean greedy reward over the trained
domains beats the best one so far has the policy saved to `best_passing/checkpoints/step_<n>/` (the
checkpoint format of `posttrain.train.checkpoint`, only the newest kept) and described in
`best_passing.json`, which a resumed run reads back; the summary gets both under `gate`.
Not here: the evaluation itself (`Run.evaluate`), the gate's statistics.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrain.eval.evaluate import DomainEval
from posttrain.eval.gate import GateConfig, GateResult, gate, suite_ids
from posttrain.train import checkpoint as ckpt

BEST_DIR = "best_passing"
BEST_FILE = "best_passing.json"


class BestPassing:
    """Gates each evaluation and keeps the best passing policy of a run."""

    def __init__(self, run_dir: Path, config: GateConfig, domain_ids: Sequence[str], trained_ids: Sequence[str]) -> None:
        self.run_dir = run_dir
        self.config = config
        self.trained_ids = list(trained_ids)
        self.suite = suite_ids(config.suite, domain_ids, trained_ids)
        path = run_dir / BEST_FILE
        self.best: dict[str, Any] | None = json.loads(path.read_text()) if path.is_file() else None
        self.results: dict[str, dict[str, Any]] = {}

    def observe(self, label: str, step: int, base: dict[str, DomainEval], result: dict[str, DomainEval],
                state: Callable[[], dict[str, Any]]) -> GateResult:  # fmt: skip
        """Gate `result` against `base`; save `state()` when it passes and is the best so far."""
        outcome = gate(label, _scores(base), _scores(result), self.suite, self.config.margin)
        mean = _mean([result[d].mean_reward for d in self.trained_ids if d in result])
        record = {"label": label, "step": step, "passed": outcome.passed, "offenders": outcome.offenders,
                  "mean_trained_reward": mean}  # fmt: skip
        self.results[label] = record
        (self.run_dir / f"gate_{label}.json").write_text(json.dumps(outcome.to_dict(), indent=2))
        if outcome.passed and (self.best is None or mean > self.best["mean_trained_reward"]):
            path = ckpt.save_checkpoint(self.run_dir / BEST_DIR, state(), extra={"loop_step": step, "label": label},
                                        keep_last=1)  # fmt: skip
            self.best = {**record, "path": str(path)}
            (self.run_dir / BEST_FILE).write_text(json.dumps(self.best, indent=2))
        return outcome

    def summary(self) -> dict[str, Any]:
        """`summary.json`'s `gate` block: the margin, the suite, each evaluation's verdict, the best."""
        return {"margin": self.config.margin, "suite": self.suite, "evaluations": list(self.results.values()),
                "best_passing": self.best}  # fmt: skip


def _scores(result: dict[str, DomainEval]) -> dict[str, tuple[Sequence[str], Sequence[float]]]:
    return {d: (e.task_ids, e.rewards) for d, e in result.items()}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
