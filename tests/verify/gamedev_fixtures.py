"""Helpers for the gamedev tests: play a task's play-throughs in this process (no sandbox) and build tasks.

`play_in_process` runs the very tests source the `gamedev_play` verifier sends to the sandbox, with a
plain Python function as the candidate: fast enough to check the gold of hundreds of tasks, and the
engine's sources (as embedded) against the gold written independently of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.gamedev import GameDevConfig, GameDevFamily
from posttrain.types import DomainSpec, Task
from posttrain.verify.code import extract_code
from posttrain.verify.gamedev.play import playthrough_names, tests_source

FAMILY = GameDevFamily(GameDevConfig())


def domain(domain_id: str) -> DomainSpec:
    return next(d for d in FAMILY.domains() if d.id == domain_id)


def task(domain_id: str, index: int = 0, seed: int = 0) -> Task:
    return FAMILY.task(domain(domain_id), index, seed)


def function_of(response: str, name: str) -> Callable[..., Any]:
    """The function `name` defined by a response's code (trusted test code only)."""
    namespace: dict[str, Any] = {}
    exec(extract_code(response), namespace)  # noqa: S102 - the tests' own reference solutions
    return namespace[name]  # type: ignore[no-any-return]


def play_in_process(gold: dict[str, Any], candidate: Callable[..., Any], seed: int) -> dict[str, bool]:
    """Play-through name -> whether `candidate` played it right, run here instead of in the sandbox."""
    namespace: dict[str, Any] = {"PLAY_SEED": seed}
    exec(tests_source(json.dumps(gold, sort_keys=True)), namespace)  # noqa: S102 - the verifier's own tests
    return {name: bool(namespace["play"](candidate, i)) for i, name in enumerate(playthrough_names(gold))}


def gold_passes(t: Task, seed: int) -> bool:
    assert isinstance(t.gold, dict) and t.answer is not None
    return all(play_in_process(t.gold, function_of(t.answer, t.gold["entry_point"]), seed).values())
