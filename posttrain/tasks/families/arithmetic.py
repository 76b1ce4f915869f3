"""Integer arithmetic: `math/arithmetic/{add,sub,mul,multistep}@{easy,medium,hard}`.

Short prompts a tiny model can learn ("What is 37 + 8?"), graded numerically. Levels scale the operand
width (and the number of terms for multistep). Generation is random-access by index; the stream is
unbounded (`size=None`), so duplicates occur in small levels and the content-hash split keeps them on one
side. Not here: word problems or non-integer maths (use JSONL datasets or reasoning-gym for those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import op_level_domains, task_id, task_rng
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.configs import NumericConfig, VerifierConfig

ArithmeticOp = Literal["add", "sub", "mul", "multistep"]
_ALL_OPS: tuple[ArithmeticOp, ...] = get_args(ArithmeticOp)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)

# level -> (operand digits for add/sub, operand digits for mul, number of terms for multistep)
_LEVEL_SHAPE: dict[str, tuple[int, int, int]] = {
    "easy": (1, 1, 3),
    "medium": (2, 2, 4),
    "hard": (4, 3, 5),
}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


def _verifier_of(op: str) -> str:
    return "numeric"


class ArithmeticConfig(StrictModel):
    kind: Literal["arithmetic"] = "arithmetic"
    """Built-in integer arithmetic."""
    ops: list[ArithmeticOp] = Field(default_factory=lambda: list(_ALL_OPS))
    """Which operations become domains."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which difficulty levels become domains."""


class ArithmeticFamily:
    """Generates `a op b` and multi-step expressions; the gold answer is the integer value."""

    def __init__(self, config: ArithmeticConfig) -> None:
        self.config = config

    def domains(self) -> Sequence[DomainSpec]:
        ops, levels = self.config.ops, self.config.levels
        return op_level_domains("math/arithmetic", "arithmetic", "integer", ops, levels, _verifier_of)

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        rng = task_rng(seed, domain.id, index)
        op = domain.path.domain
        add_digits, mul_digits, num_terms = _LEVEL_SHAPE[domain.level or "medium"]
        if op == "multistep":
            terms = [rng.randrange(1, 10 ** min(add_digits, 2)) for _ in range(num_terms)]
            ops = [rng.choice("+-*") if i else "" for i in range(num_terms)]
            expr = " ".join(f"{o} {t}" if o else str(t) for o, t in zip(ops, terms, strict=True))
        else:
            digits = mul_digits if op == "mul" else add_digits
            a, b = (rng.randrange(0, 10**digits) for _ in range(2))
            expr = f"{a} {_SYMBOL[op]} {b}"
        value = _evaluate(expr)
        return Task(
            id=task_id(domain.id, index),
            domain_id=domain.id,
            prompt=f"What is {expr}?",
            gold=str(value),
            answer=str(value),
            difficulty=domain.difficulty,
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return NumericConfig(extract="auto")


def _evaluate(expr: str) -> int:
    """Evaluate `a op b op c ...` with the usual precedence (* before + and -)."""
    tokens = expr.split()
    # Fold multiplications first, then left-to-right additive terms.
    values: list[int] = [int(tokens[0])]
    signs: list[str] = []
    for op, raw in zip(tokens[1::2], tokens[2::2], strict=True):
        if op == "*":
            values[-1] *= int(raw)
        else:
            signs.append(op)
            values.append(int(raw))
    total = values[0]
    for sign, value in zip(signs, values[1:], strict=True):
        total = total + value if sign == "+" else total - value
    return total
