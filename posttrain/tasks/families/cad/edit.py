""""Edit this model" tasks (`3d/openscad/edit@<level>`): the prompt gives an OpenSCAD file and asks for
one dimension changed.

The model is a part drawn from the other families (plates, brackets, enclosures, composites, tubes and
boxes); the dimension is one of its `editable` ones (each moves a large share of the volume), changed by
a factor in [1.4, 1.8] or [0.55, 0.7] so that the unedited file cannot pass. easy: the file declares
its dimensions as variables and the instruction names the variable. medium: the same file, the
instruction names the feature in words. hard: the file has its numbers written inline (no variables),
so every place the dimension enters (positions derived from it included) must be found and changed.
The gold is the builder's own rebuild with the new value, written the way the file was.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from posttrain.tasks.families.cad import bracket, composite, enclosure, plate, primitive
from posttrain.tasks.families.cad.part import Part, num

SOURCES: tuple[Callable[[str, random.Random], Part], ...] = (
    plate.draw, bracket.draw, enclosure.draw, composite.draw, primitive.draw
)
FACTORS = ((1.4, 1.8), (0.55, 0.7))


@dataclass(frozen=True)
class EditStyle:
    """How an edit level shows the file and words the change."""

    base_level: str
    """The level of the model being edited."""
    names_variable: bool
    """The instruction names the variable (else the feature, in words)."""
    literal: bool
    """The file has numbers inline instead of variables."""


STYLES = {"easy": EditStyle("easy", True, False), "medium": EditStyle("medium", False, False),
          "hard": EditStyle("medium", False, True)}  # fmt: skip


@dataclass(frozen=True)
class Edit:
    """A part, one of its dimensions and the new value: what an edit task is made of."""

    before: Part
    after: Part
    name: str
    phrase: str
    old_mm: float
    new_mm: float


def draw_edit(style: EditStyle, rng: random.Random) -> Edit:
    """An edit in `style`: a part with editable dimensions and a valid new value for one of them."""
    for _ in range(200):
        part = rng.choice(SOURCES)(style.base_level, rng)
        if not part.editable:
            continue
        target = rng.choice(part.editable)
        old = part.values[target.name]
        low, high = rng.choice(FACTORS)
        new = round(old * rng.uniform(low, high) * 2) / 2
        if not any(lo <= new / old <= hi for lo, hi in FACTORS):
            continue  # rounding to 0.5 mm took a small dimension out of the band
        try:
            after = part.with_value(target.name, new)
        except ValueError:
            continue
        return Edit(part, after, target.name, target.phrase, old, new)
    raise RuntimeError("no valid edit in 200 draws")  # a generator bug: no part admits any edit


def instruction(edit: Edit, style: EditStyle) -> str:
    """What the prompt asks for."""
    if style.names_variable:
        return f"Change `{edit.name}` from {num(edit.old_mm)} to {num(edit.new_mm)}."
    return f"Change {edit.phrase} from {num(edit.old_mm)} mm to {num(edit.new_mm)} mm."
