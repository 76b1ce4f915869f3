"""3D modelling domains in OpenSCAD, graded by geometry (verifier kind `cad_geometry`): family kind `cad`
(opt-in).

Domains `3d/openscad/<family>@<level>` for the families `primitive` (exact dimensions), `plate` (hole
patterns), `bracket` and `enclosure` (parametric specs), `composite` (union / difference /
intersection) and `edit` (a given file with one dimension to change), each at easy, medium and hard;
each an unbounded procedural stream. A task's prompt states every dimension, where the part sits
relative to the origin and the `$fn` of round features; `Task.answer` is the reference program in an
```openscad block; `Task.gold` is `{"format": "openscad", "family", "level", "reference", "spec"}` (and,
for edits, `original` and `edit`), where `spec` names the part, its dimensions, its expected genus
(through holes), shells and, where exact, bounding box.

Guarantees: tasks are deterministic in (seed, domain, index); the reference renders the described part.
When `openscad` or trimesh is missing the family offers no domains and says why in `problems` (printed
as a warning by the CLI). Not here: rendering and grading (`posttrain.verify.cad`).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import op_level_domains, task_id, task_rng
from posttrain.tasks.families.cad import bracket, composite, enclosure, plate, primitive
from posttrain.tasks.families.cad.edit import STYLES, draw_edit, instruction
from posttrain.tasks.families.cad.part import FN, Part
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.cad_mesh import mesh_libraries
from posttrain.verify.configs import CadGeometryConfig, VerifierConfig

CadFamilyName = Literal["primitive", "plate", "bracket", "enclosure", "composite", "edit"]
PREFIX = "3d/openscad"
Made = tuple[str, dict[str, Any], str]
"""A task's prompt, gold record and answer."""
REPLY = "Reply with the complete program in one ```openscad code block."
_ALL_FAMILIES: tuple[CadFamilyName, ...] = get_args(CadFamilyName)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)


class CadConfig(StrictModel):
    kind: Literal["cad"] = "cad"
    """OpenSCAD modelling domains graded by the geometry of the rendered solid (opt-in)."""
    families: list[CadFamilyName] = Field(default_factory=lambda: list(_ALL_FAMILIES))
    """Which families become domains (`3d/openscad/<family>@<level>`)."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which levels become domains."""


def fenced(source: str) -> str:
    """`source` as a response: one ```openscad block."""
    return f"```openscad\n{source.rstrip()}\n```"


def model_prompt(part: Part) -> str:
    """The prompt of a modelling task: the part in words, its placement, the conventions."""
    return (f"Write an OpenSCAD program for the following part. All dimensions are in millimetres.\n\n"
            f"{part.description}\n\nPlacement: {part.placement}.\n"
            f"Use $fn = {FN} for round features.\n{REPLY}")  # fmt: skip


def edit_prompt(part: Part, literal: bool, ask: str) -> str:
    """The prompt of an edit task: the file, then the change."""
    where = (" Change it everywhere it is used, positions computed from it included; leave every other "
             "dimension as it is.") if literal else " Leave everything else as it is."  # fmt: skip
    return (f"Here is an OpenSCAD model of a {part.noun} (dimensions in millimetres):\n\n"
            f"{fenced(part.source(literal))}\n\n{ask}{where}\n{REPLY}")  # fmt: skip


def gold_record(family: str, level: str, part: Part, source: str, **extra: Any) -> dict[str, Any]:
    """`Task.gold` of a cad task."""
    return {"format": "openscad", "family": family, "level": level, "reference": source, "spec": part.spec(), **extra}


def missing_tools() -> list[str]:
    """What this host lacks to render and grade cad tasks."""
    missing = [] if shutil.which("openscad") else ["openscad (apt-get install openscad)"]
    return missing + ([] if mesh_libraries()[0] else ["trimesh (pip install 'posttrain[cad]')"])


class CadFamily:
    """Generates OpenSCAD modelling tasks."""

    def __init__(self, config: CadConfig) -> None:
        self.config = config
        self.problems: list[str] = []
        missing = missing_tools()
        if missing:
            self.problems.append(f"{PREFIX} domains left out: missing {', '.join(missing)}")
        families = [] if missing else config.families
        self._domains = op_level_domains(PREFIX, "cad", "OpenSCAD", families, config.levels,
                                         lambda _family: "cad_geometry")  # fmt: skip

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return CadGeometryConfig()

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        family, level = domain.path.domain, domain.level or "medium"
        prompt, gold, answer = MAKERS[family](level, task_rng(seed, domain.id, index))
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=prompt, gold=gold, answer=answer,
                    difficulty=domain.difficulty)  # fmt: skip


def modelling_task(family: str, draw: Callable[[str, random.Random], Part]) -> Callable[[str, random.Random], Made]:
    """The maker of a family's tasks: describe a drawn part, answer with its parametric source."""

    def make(level: str, rng: random.Random) -> Made:
        part = draw(level, rng)
        source = part.source()
        return model_prompt(part), gold_record(family, level, part, source), fenced(source)

    return make


def edit_task(level: str, rng: random.Random) -> Made:
    """An edit task: the file before, the change asked for, the file after as the answer."""
    style = STYLES[level]
    edit = draw_edit(style, rng)
    source = edit.after.source(style.literal)
    change = {"dimension": edit.name, "from_mm": edit.old_mm, "to_mm": edit.new_mm}
    gold = gold_record("edit", level, edit.after, source, original=edit.before.source(style.literal), edit=change)
    return edit_prompt(edit.before, style.literal, instruction(edit, style)), gold, fenced(source)


MAKERS: dict[str, Callable[[str, random.Random], Made]] = {
    "primitive": modelling_task("primitive", primitive.draw), "plate": modelling_task("plate", plate.draw),
    "bracket": modelling_task("bracket", bracket.draw), "enclosure": modelling_task("enclosure", enclosure.draw),
    "composite": modelling_task("composite", composite.draw), "edit": edit_task,
}  # fmt: skip
