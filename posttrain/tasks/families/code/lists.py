"""Functions of one list of ints: `code/function/lists@{easy,medium,hard}`.

Easy is a builtin or one comprehension (sum, map, reverse); medium a filter or a reduction with a
condition; hard carries state across elements (running sums, de-duplication, rotation). Values grow
with the level and include negatives from medium on; the empty list and a one-element list are always
tested.
"""

from __future__ import annotations

import random
from itertools import accumulate

from posttrain.tasks.families.code.procedural import CodeFamilySpec, Op, Params, constant

_SHAPE = {"easy": (4, 0, 9), "medium": (6, -20, 20), "hard": (8, -50, 50)}
"""Level -> (max length, min value, max value)."""


def _second_largest(xs: list[int]) -> int | None:
    distinct = sorted(set(xs))
    return distinct[-2] if len(distinct) > 1 else None


def _rotate(p: Params, xs: list[int]) -> list[int]:
    if not xs:
        return []
    k = p["k"] % len(xs)
    return [xs[(i + k) % len(xs)] for i in range(len(xs))]


EASY = (
    Op("the sum of {arg}", "return sum({arg})", lambda p, xs: sum(xs, start=0), "int"),
    Op("the number of elements in {arg}", "return len({arg})", lambda p, xs: sum(1 for _ in xs), "int"),
    Op("{arg} with every element multiplied by {k}", "return [x * {k} for x in {arg}]",
       lambda p, xs: list(map(lambda x: p["k"] * x, xs)), "list[int]", constant(2, 9)),
    Op("{arg} with {k} added to every element", "return [x + {k} for x in {arg}]",
       lambda p, xs: list(map(lambda x: p["k"] + x, xs)), "list[int]", constant(1, 9)),
    Op("{arg} in reverse order", "return {arg}[::-1]", lambda p, xs: list(reversed(xs)), "list[int]"),
    Op("{arg} sorted in ascending order", "return sorted({arg})", lambda p, xs: sorted(xs), "list[int]"),
)
MEDIUM = (
    Op("the elements of {arg} greater than {k}, in order", "return [x for x in {arg} if x > {k}]",
       lambda p, xs: list(filter(lambda x: x > p["k"], xs)), "list[int]", constant(-5, 5)),
    Op("the even elements of {arg}, in order", "return [x for x in {arg} if x % 2 == 0]",
       lambda p, xs: list(filter(lambda x: not x & 1, xs)), "list[int]"),
    Op("how many elements of {arg} are greater than {k}", "return sum(1 for x in {arg} if x > {k})",
       lambda p, xs: len([x for x in xs if x > p["k"]]), "int", constant(-5, 5)),
    Op("the sum of the squares of the elements of {arg}", "return sum(x * x for x in {arg})",
       lambda p, xs: sum(x**2 for x in xs), "int"),
    Op("the largest element of {arg}, or {k} when {arg} is empty", "return max({arg}) if {arg} else {k}",
       lambda p, xs: max(xs, default=p["k"]), "int", constant(-9, 0)),
    Op("the squares of the odd elements of {arg}, in order", "return [x * x for x in {arg} if x % 2 == 1]",
       lambda p, xs: [x**2 for x in xs if x & 1], "list[int]"),
)
HARD = (
    Op("the running sums of {arg} (element i is the sum of the first i + 1 elements)",
       "out = []\ntotal = 0\nfor x in {arg}:\n    total += x\n    out.append(total)\nreturn out",
       lambda p, xs: list(accumulate(xs)), "list[int]"),
    Op("{arg} without repeated values, first occurrences kept in order",
       "seen = set()\nout = []\nfor x in {arg}:\n    if x not in seen:\n        seen.add(x)\n        out.append(x)\nreturn out",
       lambda p, xs: list(dict.fromkeys(xs)), "list[int]"),
    Op("the differences between consecutive elements of {arg} (next minus current)",
       "return [b - a for a, b in zip({arg}, {arg}[1:])]", lambda p, xs: [xs[i + 1] - xs[i] for i in range(len(xs) - 1)],
       "list[int]"),
    Op("the second largest distinct value in {arg}, or None when there is none",
       "values = sorted(set({arg}))\nreturn values[-2] if len(values) > 1 else None", lambda p, xs: _second_largest(xs),
       "int | None"),
    Op("{arg} rotated left by {k} places (the first element moves to the end {k} times)",
       "if not {arg}:\n    return []\nk = {k} % len({arg})\nreturn {arg}[k:] + {arg}[:k]", _rotate, "list[int]",
       constant(1, 5)),
    Op("the indices of the elements of {arg} greater than {k}, in order",
       "return [i for i, x in enumerate({arg}) if x > {k}]", lambda p, xs: [i for i in range(len(xs)) if xs[i] > p["k"]],
       "list[int]", constant(-5, 5)),
)


def _random_list(rng: random.Random, level: str) -> list[int]:
    max_length, low, high = _SHAPE[level]
    return [rng.randint(low, high) for _ in range(rng.randint(2, max_length))]


SPEC = CodeFamilySpec(
    name="lists", arg="xs", arg_type="list[int]", levels={"easy": EASY, "medium": MEDIUM, "hard": HARD},
    edge_inputs=([], [0]), random_input=_random_list,
)
