"""Calculator family: unit conversion and sums through tools (`agent/tools/calculator@<level>`).

easy: convert one quantity (1 call); medium: a + b in b's unit (convert, add); hard: a + b + c in the
smallest unit (convert, convert, add, add). Conversions go from larger to smaller units, so every value
is an integer. The state is empty (nothing to change); only the answer is graded.
Not here: parsing expressions (the tools take numbers, so a tiny model writes short arguments).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.tool_use.common import ANSWER_FORMAT, FamilySpec, Generated, State, ToolError

# unit -> (dimension, size in the dimension's base unit)
UNITS: dict[str, tuple[str, int]] = {
    "km": ("length", 1_000_000), "m": ("length", 1000), "cm": ("length", 10), "mm": ("length", 1),
    "kg": ("mass", 1000), "g": ("mass", 1), "h": ("time", 3600), "min": ("time", 60), "s": ("time", 1),
}  # fmt: skip
_NUM_TERMS = {"easy": 1, "medium": 2, "hard": 3}


def number(value: float) -> float | int:
    """An integral float as an int (tool results read `2000`, not `2000.0`)."""
    return int(value) if float(value).is_integer() else round(value, 6)


def tools(state: State) -> list[Callable[..., Any]]:
    def convert(value: float, unit: str, to: str) -> float | int:
        """Convert a quantity to another unit.

        Args:
            value: The amount.
            unit: Its unit, e.g. km.
            to: The target unit, e.g. m.
        """
        if unit not in UNITS or to not in UNITS or UNITS[unit][0] != UNITS[to][0]:
            raise ToolError(f"cannot convert {unit} to {to}")
        return number(value * UNITS[unit][1] / UNITS[to][1])

    def add(a: float, b: float) -> float | int:
        """Add two numbers.

        Args:
            a: First number.
            b: Second number.
        """
        return number(a + b)

    return [convert, add]


def generate(rng: random.Random, level: str) -> Generated:
    num_terms = _NUM_TERMS[level]
    dimension = rng.choice(["length", "time"] if num_terms == 3 else ["length", "mass", "time"])
    names = sorted((u for u, (d, _) in UNITS.items() if d == dimension), key=lambda u: -UNITS[u][1])
    if num_terms == 1:
        units = rng.sample(names[:-1], 1)
        target = rng.choice([u for u in names if UNITS[u][1] < UNITS[units[0]][1]])
    else:
        chosen = sorted(rng.sample(names, num_terms), key=lambda u: -UNITS[u][1])
        units, target = chosen, chosen[-1]
    amounts = [rng.randint(2, 40) for _ in units]
    plan: list[tuple[str, dict[str, Any]]] = []
    values = []
    for amount, unit in zip(amounts, units, strict=True):
        if unit == target:
            values.append(amount)
            continue
        plan.append(("convert", {"value": amount, "unit": unit, "to": target}))
        values.append(amount * UNITS[unit][1] // UNITS[target][1])
    total = values[0]
    for value in values[1:]:
        plan.append(("add", {"a": total, "b": value}))
        total += value
    terms = " + ".join(f"{a} {u}" for a, u in zip(amounts, units, strict=True))
    return Generated(f"What is {terms} in {target}? {ANSWER_FORMAT}", {}, plan, str(total))


SPEC = FamilySpec("calculator", "Use the tools for every conversion and sum.", generate, tools)
