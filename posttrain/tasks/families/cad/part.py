"""A parametric OpenSCAD part: named dimensions, a body written over them, and what a prompt says of it.

Every cad family draws `Part`s. A part renders as OpenSCAD two ways: `source()` declares each dimension
as a variable at the top and writes the body over the names (what a person would write); `source(literal
=True)` writes the same body with every name replaced by its number (the "hard" edit tasks show that).
Both render the same solid. `Part.with_value` rebuilds the part with one dimension changed, through the
builder that made it, so positions derived from that dimension move with it.

Guarantees: sources are deterministic text; numbers print without trailing zeros; a builder raises
`ValueError` for dimensions that do not make a valid part (holes outside the plate, walls thicker than
the box...). Not here: prompts (`__init__.py`), rendering (the verifier).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FN = 48
"""Segments of every round feature (a multiple of 4, so a cylinder's bounding box is exact)."""

Dimensions = dict[str, float]


def num(value: float) -> str:
    """`value` as OpenSCAD source: `12`, `12.5`, `-3.25` (no trailing zeros, no exponent)."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def half_steps(rng: random.Random, low: float, high: float) -> float:
    """A multiple of 0.5 in [low, high]."""
    return rng.randint(round(2 * low), round(2 * high)) / 2


@dataclass(frozen=True)
class Editable:
    """A dimension an edit task may change, and how the prompt names it."""

    name: str
    """The variable."""
    phrase: str
    """What it is, for an instruction: "the plate's thickness"."""


@dataclass(frozen=True)
class Part:
    """One part: its dimensions, its OpenSCAD body over them, and its description."""

    noun: str
    """What it is: "mounting plate"."""
    values: Dimensions
    """Dimension name -> millimetres, in declaration order."""
    body: str
    """OpenSCAD over the dimension names (and `$fn`)."""
    description: str
    """The part in words, every number stated (the prompt's body)."""
    placement: str
    """Where the part sits relative to the origin."""
    holes: int
    """Expected genus: through holes (and handles)."""
    bounds_mm: tuple[tuple[float, float, float], tuple[float, float, float]] | None
    """Expected bounding box (min corner, max corner), or None where polygonisation makes it inexact."""
    rebuild: Callable[[Dimensions], Part] = field(compare=False, repr=False)
    """The builder, for `with_value`."""
    editable: tuple[Editable, ...] = ()
    """Dimensions that change the part a lot (edit tasks)."""
    shells: int = 1
    """Expected number of separate surfaces."""

    def source(self, literal: bool = False) -> str:
        """The OpenSCAD program: variables then body, or the body with numbers in place of the names."""
        header = f"$fn = {FN};\n"
        if literal:
            return header + substitute(self.body, self.values)
        return header + "".join(f"{name} = {num(value)};\n" for name, value in self.values.items()) + self.body

    def with_value(self, name: str, value: float) -> Part:
        """This part with one dimension changed (ValueError when that makes it invalid)."""
        return self.rebuild({**self.values, name: value})

    def spec(self) -> dict[str, Any]:
        """The JSON-able description of the part kept in `Task.gold["spec"]`."""
        bounds = None if self.bounds_mm is None else [list(self.bounds_mm[0]), list(self.bounds_mm[1])]
        return {"part": self.noun, "dimensions_mm": dict(self.values), "holes": self.holes,
                "shells": self.shells, "bounds_mm": bounds}  # fmt: skip


def substitute(body: str, values: Mapping[str, float]) -> str:
    """`body` with each whole-word dimension name used as a value replaced by its number."""
    if not values:
        return body
    names = sorted(values, key=len, reverse=True)
    # A name followed by a single `=` is a named argument (`linear_extrude(height = ...)`), not a value.
    pattern = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, names)) + r")(?!\w)(?!\s*=(?!=))")
    return pattern.sub(lambda m: num(values[m.group(1)]), body)


def require(condition: bool, message: str) -> None:
    """Raise ValueError(message) unless `condition` (a builder's validity check)."""
    if not condition:
        raise ValueError(message)


Box = tuple[tuple[float, float, float], tuple[float, float, float]]


def box(x: float, y: float, z: float, x0: float = 0.0, y0: float = 0.0, z0: float = 0.0) -> Box:
    """The bounds of an axis-aligned box of size (x, y, z) with its minimum corner at (x0, y0, z0)."""
    return (x0, y0, z0), (x0 + x, y0 + y, z0 + z)


def first_valid(rng: random.Random, make: Callable[[random.Random], Part], tries: int = 100) -> Part:
    """The first part `make` draws that its builder accepts (deterministic in the RNG)."""
    for _ in range(tries):
        try:
            return make(rng)
        except ValueError:
            continue
    raise RuntimeError(f"no valid part in {tries} draws")  # a generator bug: the ranges admit no part
