"""The trainer's gate: each evaluation gated against the base, the best passing policy kept on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from posttrain.eval.evaluate import DomainEval
from posttrain.eval.gate import GateConfig
from posttrain.train.best_passing import BEST_DIR, BEST_FILE, BestPassing
from posttrain.train.checkpoint import list_checkpoints, load_model_tensors

TRAINED = "text/strings/reverse@easy"
UNTRAINED = "data/lists/sum@easy"


def _eval(domain: str, rewards: list[float]) -> DomainEval:
    n = len(rewards)
    return DomainEval(domain, n, sum(rewards) / n, sum(rewards) / n, 0, 1.0,
                      task_ids=tuple(f"{domain}#{i}" for i in range(n)), rewards=tuple(rewards))  # fmt: skip


def _result(trained: float, untrained_passes: int) -> dict[str, DomainEval]:
    return {TRAINED: _eval(TRAINED, [trained] * 40),
            UNTRAINED: _eval(UNTRAINED, [1.0] * untrained_passes + [0.0] * (40 - untrained_passes))}  # fmt: skip


def _state(value: float) -> Any:
    return lambda: {"model": {"w": torch.full((2,), value)}, "step": int(value)}


def test_the_best_passing_evaluation_is_kept_and_a_failing_one_never(tmp_path: Path) -> None:
    keeper = BestPassing(tmp_path, GateConfig(enabled=True), [TRAINED, UNTRAINED], [TRAINED])
    assert keeper.suite == [TRAINED, UNTRAINED]  # text/* is general, sum@easy untrained
    base = _result(0.2, 20)
    assert keeper.observe("step10", 10, base, _result(0.4, 20), _state(10.0)).passed
    assert keeper.observe("step20", 20, base, _result(0.3, 21), _state(20.0)).passed  # passes, not better
    failed = keeper.observe("step30", 30, base, _result(0.9, 5), _state(30.0))  # best reward, lost sum@easy
    assert not failed.passed and failed.offenders[0] == UNTRAINED
    best = json.loads((tmp_path / BEST_FILE).read_text())
    assert (best["label"], best["step"]) == ("step10", 10)
    (kept,) = list_checkpoints(tmp_path / BEST_DIR)
    assert torch.equal(load_model_tensors(kept)["w"], torch.full((2,), 10.0))
    assert json.loads((tmp_path / "gate_step30.json").read_text())["passed"] is False
    summary = keeper.summary()
    assert [e["passed"] for e in summary["evaluations"]] == [True, True, False]
    assert summary["best_passing"]["path"] == str(kept)
    resumed = BestPassing(tmp_path, GateConfig(enabled=True), [TRAINED, UNTRAINED], [TRAINED])
    assert resumed.best == best  # a resumed run knows its best so far
