"""String transforms: `text/strings/{reverse,sort_chars,caesar,count_char}@{easy,medium,hard}`.

Words are random lowercase letters; levels scale their length (and the Caesar shift). Gold answers are
single tokens of text graded by exact match after extraction (counts numerically).
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import op_level_domains, task_id, task_rng
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.configs import ExactConfig, NumericConfig, VerifierConfig

StringOp = Literal["reverse", "sort_chars", "caesar", "count_char"]
_ALL_OPS: tuple[StringOp, ...] = get_args(StringOp)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)

_LENGTHS: dict[str, tuple[int, int]] = {"easy": (3, 4), "medium": (5, 7), "hard": (8, 12)}
_MAX_SHIFT: dict[str, int] = {"easy": 1, "medium": 3, "hard": 13}


def _verifier_of(op: str) -> str:
    return "numeric" if op == "count_char" else "exact"


class StringsConfig(StrictModel):
    kind: Literal["strings"] = "strings"
    """Built-in string transforms."""
    ops: list[StringOp] = Field(default_factory=lambda: list(_ALL_OPS))
    """Which transforms become domains."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which difficulty levels become domains."""


class StringsFamily:
    """Reverse, sort characters, Caesar-shift, or count a character in a random word."""

    def __init__(self, config: StringsConfig) -> None:
        self.config = config

    def domains(self) -> Sequence[DomainSpec]:
        ops, levels = self.config.ops, self.config.levels
        return op_level_domains("text/strings", "strings", "string", ops, levels, _verifier_of)

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        rng = task_rng(seed, domain.id, index)
        level = domain.level or "medium"
        word = _word(rng, *_LENGTHS[level])
        prompt, answer = _make(domain.path.domain, word, rng, _MAX_SHIFT[level])
        return Task(
            id=task_id(domain.id, index),
            domain_id=domain.id,
            prompt=prompt,
            gold=answer,
            answer=answer,
            difficulty=domain.difficulty,
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        if domain.path.domain == "count_char":
            return NumericConfig(extract="auto")
        return ExactConfig(extract="auto")


def _word(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase[:12]) for _ in range(rng.randint(low, high)))


def _make(op: str, word: str, rng: random.Random, max_shift: int) -> tuple[str, str]:
    if op == "reverse":
        return f"Reverse the string: {word}", word[::-1]
    if op == "sort_chars":
        return f"Sort the letters of: {word}", "".join(sorted(word))
    if op == "caesar":
        shift = rng.randint(1, max_shift)
        shifted = "".join(chr((ord(c) - 97 + shift) % 26 + 97) for c in word)
        return f"Shift each letter of {word} forward by {shift}:", shifted
    letter = rng.choice(word)
    return f"How many times does {letter} occur in {word}?", str(word.count(letter))
