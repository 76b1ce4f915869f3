"""Shared pieces of the cad verifier tests: a plate task, host checks, and a fake sandbox pool."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pytest

from posttrain.sandbox import ExecResult
from posttrain.sandbox.host import host_features
from posttrain.tasks.families.cad import fenced, gold_record
from posttrain.tasks.families.cad.part import Part
from posttrain.tasks.families.cad.plate import corner_holes
from posttrain.types import Task
from posttrain.verify.cad import PROGRAM_FILE

requires_openscad = pytest.mark.skipif(
    not host_features().bwrap_usable or shutil.which("openscad") is None,
    reason="needs bubblewrap and openscad",
)
PLATE = corner_holes({"length": 60, "width": 40, "thickness": 4, "hole_diameter": 5, "inset": 7})
"""A 60 x 40 x 4 plate with four 5 mm holes 7 mm in from each corner (genus 4)."""


def task_for(part: Part, reference: str | None = None, domain_id: str = "3d/openscad/plate@medium") -> Task:
    source = part.source() if reference is None else reference
    gold = gold_record("plate", "medium", part, source)
    return Task(id=f"{domain_id}#0", domain_id=domain_id, prompt="model the plate", gold=gold, answer=fenced(source))


class FakePool:
    """Stands in for a `SandboxPool`: answers each run from `answer(program)` and records the programs."""

    def __init__(self, answer: Callable[[str], ExecResult]) -> None:
        self.answer = answer
        self.programs: list[str] = []

    async def run(self, argv: Any, files: dict[str, bytes] | None = None, **_: Any) -> ExecResult:
        program = (files or {})[PROGRAM_FILE].decode()
        self.programs.append(program)
        return self.answer(program)
