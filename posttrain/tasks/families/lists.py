"""List operations: `data/lists/{max,sort,dedupe,sum}@{easy,medium,hard}`.

Lists of small non-negative integers written space-separated; answers are a number (max, sum) or a
space-separated list (sort, dedupe — first occurrences kept in order), graded after whitespace
normalisation. Levels scale the list length and value range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import op_level_domains, task_id, task_rng
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.configs import NormalizedConfig, NumericConfig, VerifierConfig

ListOp = Literal["max", "sort", "dedupe", "sum"]
_ALL_OPS: tuple[ListOp, ...] = get_args(ListOp)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)

# level -> (min length, max length, exclusive value bound)
_SHAPE: dict[str, tuple[int, int, int]] = {"easy": (3, 4, 10), "medium": (5, 7, 20), "hard": (8, 12, 100)}
_PROMPT = {
    "max": "Largest number in: {}",
    "sort": "Sort ascending: {}",
    "dedupe": "Remove duplicates, keep order: {}",
    "sum": "Sum of: {}",
}


def _verifier_of(op: str) -> str:
    return "numeric" if op in ("max", "sum") else "normalized"


class ListsConfig(StrictModel):
    kind: Literal["lists"] = "lists"
    """Built-in list operations."""
    ops: list[ListOp] = Field(default_factory=lambda: list(_ALL_OPS))
    """Which operations become domains."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which difficulty levels become domains."""


class ListsFamily:
    """Max, sort, dedupe or sum of a random integer list."""

    def __init__(self, config: ListsConfig) -> None:
        self.config = config

    def domains(self) -> Sequence[DomainSpec]:
        ops, levels = self.config.ops, self.config.levels
        return op_level_domains("data/lists", "lists", "list", ops, levels, _verifier_of)

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        rng = task_rng(seed, domain.id, index)
        low, high, bound = _SHAPE[domain.level or "medium"]
        values = [rng.randrange(bound) for _ in range(rng.randint(low, high))]
        op = domain.path.domain
        answer = _answer(op, values)
        return Task(
            id=task_id(domain.id, index),
            domain_id=domain.id,
            prompt=_PROMPT[op].format(" ".join(map(str, values))),
            gold=answer,
            answer=answer,
            difficulty=domain.difficulty,
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        if domain.path.domain in ("max", "sum"):
            return NumericConfig(extract="auto")
        return NormalizedConfig(extract="final_line")


def _answer(op: str, values: list[int]) -> str:
    if op == "max":
        return str(max(values))
    if op == "sum":
        return str(sum(values))
    if op == "sort":
        return " ".join(map(str, sorted(values)))
    return " ".join(map(str, dict.fromkeys(values)))
