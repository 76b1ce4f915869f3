"""The `cad_geometry` verifier: failure attribution and caching over a fake pool, then OpenSCAD in the real
sandbox — the gold passes, every bad input is a model failure scoring 0, and the geometric hacks (moved,
scaled, hollow, engulfing, missing holes) stay under the pass threshold."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from posttrain.sandbox import ExecResult
from posttrain.sandbox.lazy import LazyPool
from posttrain.sandbox.spec import sandbox_error
from posttrain.types import ErrorKind, Task
from posttrain.verify import cad
from posttrain.verify.cad import CadGeometryVerifier
from posttrain.verify.configs import CadGeometryConfig
from tests.verify.cad_fixtures import FakePool

trimesh: Any = pytest.importorskip("trimesh")


def box_stl(x: float, y: float, z: float) -> bytes:
    tri = np.asarray(trimesh.creation.box([x, y, z]).apply_translation([x / 2, y / 2, z / 2]).triangles, "<f4")
    records = np.zeros(len(tri), dtype=[("n", "<f4", (3,)), ("v", "<f4", (3, 3)), ("a", "<u2")])
    records["v"] = tri
    return b"\0" * 80 + len(tri).to_bytes(4, "little") + records.tobytes()


def fake_verifier(answer: Any) -> tuple[CadGeometryVerifier, FakePool]:
    verifier = CadGeometryVerifier(CadGeometryConfig(), pool_size=2)
    pool = FakePool(answer)

    async def started() -> Any:
        return pool

    verifier._pool = LazyPool(started)
    return verifier, pool


def ok(stdout: bytes) -> ExecResult:
    return ExecResult(status="ok", exit_code=0, stdout=stdout, stdout_bytes=len(stdout))


BOXES = {"cube([2, 3, 4]);": box_stl(2, 3, 4), "cube([2, 3, 5]);": box_stl(2, 3, 5)}
BOX_TASK = Task(id="3d/openscad/primitive@easy#0", domain_id="3d/openscad/primitive@easy", prompt="a box",
                gold={"reference": "cube([2, 3, 4]);"})  # fmt: skip


# ------------------------------------------------------------------ over a fake pool
def test_the_reference_renders_once_per_program_for_a_whole_group() -> None:
    verifier, pool = fake_verifier(lambda program: ok(BOXES[program.strip()]))
    scores = verifier.score_many([(BOX_TASK, "```scad\ncube([2, 3, 4]);\n```")] * 3 + [(BOX_TASK, "cube([2, 3, 5]);")])
    assert [s.passed for s in scores] == [True, True, True, False]
    assert [p.strip() for p in pool.programs].count("cube([2, 3, 4]);") == 1 + 3  # the reference once, then the three responses


def test_a_sandbox_error_is_infra_for_the_response_and_for_the_reference() -> None:
    verifier, _ = fake_verifier(lambda program: sandbox_error("supervisor died"))
    assert verifier.score(BOX_TASK, "cube([2, 3, 4]);").error is ErrorKind.INFRA
    reference_only = {"cube([2, 3, 4]);": sandbox_error("supervisor died")}
    verifier, _ = fake_verifier(lambda program: reference_only.get(program, ok(BOXES["cube([2, 3, 4]);"])))
    assert verifier.score(BOX_TASK, "cube([2, 3, 4.0]);").error is ErrorKind.INFRA


def test_a_reference_that_does_not_render_a_solid_is_infra() -> None:
    verifier, _ = fake_verifier(lambda program: ok(b"") if "4]" in program else ok(BOXES["cube([2, 3, 5]);"]))
    score = verifier.score(BOX_TASK, "cube([2, 3, 5]);")
    assert score.error is ErrorKind.INFRA and "reference" in score.message


@pytest.mark.parametrize("gold", [None, {}, {"reference": ""}, "not json", {"reference": 'import("x.stl");'}])
def test_bad_gold_is_infra(gold: Any) -> None:
    verifier, _ = fake_verifier(lambda program: ok(BOXES["cube([2, 3, 4]);"]))
    task = BOX_TASK.model_copy(update={"gold": gold})
    assert verifier.score(task, "cube([2, 3, 4]);").error is ErrorKind.INFRA


@pytest.mark.parametrize("result, status", [
    (ExecResult(status="timeout_wall"), "timeout"), (ExecResult(status="timeout_cpu"), "timeout"),
    (ExecResult(status="memory_limit"), "memory_limit"), (ExecResult(status="output_limit"), "mesh_too_large"),
    (ExecResult(status="runtime_error", exit_code=1, stderr=b"ERROR: Parser error: syntax error"), "compile_error"),
    (ExecResult(status="runtime_error", exit_code=1, stderr=b"Current top level object is empty."), "empty_mesh"),
    (ExecResult(status="ok", exit_code=0, stdout=b"\0" * 134, stdout_bytes=10**9), "mesh_too_large"),
    (ExecResult(status="ok", exit_code=0), "empty_mesh"),
    (ExecResult(status="ok", exit_code=0, stdout=b"\0" * 90, stdout_bytes=90), "bad_stl"),
])  # fmt: skip
def test_every_run_failure_is_the_models(result: ExecResult, status: str) -> None:
    verifier, _ = fake_verifier(lambda program: ok(BOXES["cube([2, 3, 4]);"]) if "4]" in program else result)
    score = verifier.score(BOX_TASK, "cube(1);")
    assert (score.reward, score.error, score.details["status"]) == (0.0, ErrorKind.MODEL, status)


def test_text_that_is_not_utf8_reaches_openscad_as_bytes() -> None:
    verifier, pool = fake_verifier(lambda program: ok(BOXES["cube([2, 3, 4]);"]) if "4]" in program else
                                   ExecResult(status="runtime_error", exit_code=1, stderr=b"ERROR: Parser error"))
    score = verifier.score(BOX_TASK, "cube(\ud800);")
    assert score.error is ErrorKind.MODEL and score.details["status"] == "compile_error"
    assert pool.programs[-1] == "cube(?);"


def test_rejected_programs_never_reach_the_sandbox() -> None:
    verifier, pool = fake_verifier(lambda program: ok(BOXES["cube([2, 3, 4]);"]))
    for response in ('import("/etc/passwd");', "include <x.scad>", "", "   \n"):
        score = verifier.score(BOX_TASK, response)
        assert score.reward == 0.0 and score.error is ErrorKind.MODEL
    assert pool.programs == []


def test_the_grader_sends_cad_items_to_the_verifiers_own_pool() -> None:
    # runs_in_sandbox: the Grader scores them inline, one `score_many` batch per verifier, never in workers.
    assert CadGeometryConfig().runs_in_sandbox


def test_a_pool_that_cannot_start_is_infra_for_the_whole_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cad.shutil, "which", lambda _name: None)
    verifier = CadGeometryVerifier(CadGeometryConfig(), pool_size=1)
    rendered, empty, reads_file = verifier.score_many(
        [(BOX_TASK, "cube([2, 3, 4]);"), (BOX_TASK, ""), (BOX_TASK, 'import("x.stl");')])
    assert rendered.error is ErrorKind.INFRA and "openscad is not installed" in rendered.message
    assert empty.error is ErrorKind.MODEL and reads_file.error is ErrorKind.MODEL  # decided without a sandbox
