"""Functions of one int: `code/function/integers@{easy,medium,hard}`.

Easy is one arithmetic operation with a constant; medium two steps or a comparison (Python's `%` and
`//` on negative numbers included); hard needs a branch or digits. Inputs grow with the level; 0, 1 and
-1 are always tested.
"""

from __future__ import annotations

import random

from posttrain.tasks.families.code.procedural import CodeFamilySpec, Op, constant

_RANGE = {"easy": 20, "medium": 100, "hard": 1000}


def _digit_sum(x: int) -> int:
    x, total = abs(x), 0
    while x:
        x, digit = divmod(x, 10)
        total += digit
    return total


def _reversed_digits(x: int) -> int:
    x, out = abs(x), 0
    while x:
        x, digit = divmod(x, 10)
        out = out * 10 + digit
    return out


def _ab(rng: random.Random) -> dict[str, int]:
    return {"a": rng.randint(2, 5), "b": rng.randint(1, 9)}


def _bounds(rng: random.Random) -> dict[str, int]:
    low = rng.randint(-50, 0)
    return {"lo": low, "hi": low + rng.randint(10, 100)}


EASY = (
    Op("{arg} plus {k}", "return {arg} + {k}", lambda p, x: x + p["k"], "int", constant(2, 9)),
    Op("{arg} minus {k}", "return {arg} - {k}", lambda p, x: x - p["k"], "int", constant(2, 9)),
    Op("{arg} times {k}", "return {arg} * {k}", lambda p, x: p["k"] * x, "int", constant(2, 9)),
    Op("the square of {arg}", "return {arg} * {arg}", lambda p, x: x**2, "int"),
    Op("{arg} with its sign flipped", "return -{arg}", lambda p, x: 0 - x, "int"),
)
MEDIUM = (
    Op("{a} times {arg} plus {b}", "return {a} * {arg} + {b}", lambda p, x: x * p["a"] + p["b"], "int", _ab),
    Op("the distance between {arg} and {k}", "return abs({arg} - {k})", lambda p, x: max(x, p["k"]) - min(x, p["k"]),
       "int", constant(-10, 10)),
    Op("True if {arg} is divisible by {k}, else False", "return {arg} % {k} == 0",
       lambda p, x: x == p["k"] * (x // p["k"]), "bool", constant(2, 7)),
    Op("the larger of {arg} and {k}", "return max({arg}, {k})", lambda p, x: x if x > p["k"] else p["k"], "int",
       constant(-10, 10)),
    Op("{arg} modulo {k} (Python's %)", "return {arg} % {k}", lambda p, x: x - p["k"] * (x // p["k"]), "int",
       constant(2, 9)),
    Op("{arg} divided by {k}, rounded down", "return {arg} // {k}", lambda p, x: (x - x % p["k"]) // p["k"], "int",
       constant(2, 9)),
)
HARD = (
    Op("the sum of the decimal digits of abs({arg})", "return sum(int(c) for c in str(abs({arg})))",
       lambda p, x: _digit_sum(x), "int"),
    Op("the number of decimal digits of abs({arg})", "return len(str(abs({arg})))",
       lambda p, x: 1 if x == 0 else len(str(x).lstrip("-")), "int"),
    Op("{arg} // 2 if {arg} is even, else 3 * {arg} + 1", "if {arg} % 2 == 0:\n    return {arg} // 2\nreturn 3 * {arg} + 1",
       lambda p, x: 3 * x + 1 if x % 2 else x // 2, "int"),
    Op("{arg} clamped to the range [{lo}, {hi}]", "return min(max({arg}, {lo}), {hi})",
       lambda p, x: p["lo"] if x < p["lo"] else p["hi"] if x > p["hi"] else x, "int", _bounds),
    Op("the sum of the integers from 1 to {arg} (0 when {arg} < 1)",
       "total = 0\nfor i in range(1, {arg} + 1):\n    total += i\nreturn total",
       lambda p, x: x * (x + 1) // 2 if x > 0 else 0, "int"),
    Op("abs({arg}) with its decimal digits in reverse order, as an int", "return int(str(abs({arg}))[::-1])",
       lambda p, x: _reversed_digits(x), "int"),
)


def _random_int(rng: random.Random, level: str) -> int:
    bound = _RANGE[level]
    return rng.randint(-bound, bound)


SPEC = CodeFamilySpec(
    name="integers", arg="x", arg_type="int", levels={"easy": EASY, "medium": MEDIUM, "hard": HARD},
    edge_inputs=(0, 1, -1), random_input=_random_int,
)
