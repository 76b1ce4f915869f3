"""The `cad_geometry` verifier with OpenSCAD in the real sandbox: the reference passes, every bad input is
a model failure scoring 0 (never infra), the sandbox hides host files, and geometric hacks (moved,
scaled, hollow, engulfing, holes left out or misplaced, nested shells) stay under the pass threshold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from posttrain.sandbox.background import run_blocking
from posttrain.tasks.families.cad.part import substitute
from posttrain.types import ErrorKind, Score
from posttrain.verify.cad import OPENSCAD, PROGRAM_FILE, CadGeometryVerifier
from posttrain.verify.configs import CadGeometryConfig
from tests.verify.cad_fixtures import PLATE, requires_openscad, task_for

pytest.importorskip("trimesh")
pytestmark = requires_openscad

BODY = "$fn = 48;\n" + substitute(PLATE.body, PLATE.values)
"""The plate's reference with numbers inline, to wrap in transforms."""
TASK = task_for(PLATE)
NESTED_SHELLS = """
function pts(s, o) = [for (z = [0, s]) for (y = [0, s]) for (x = [0, s]) [x + o, y + o, z + o]];
F = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]];
polyhedron(points = concat(pts(10, 0), pts(4, 3)), faces = concat(F, [for (f = F) [for (i = f) i + 8]]));
"""


@pytest.fixture(scope="module")
def verifier() -> Iterator[CadGeometryVerifier]:
    """Three seconds per render: plenty for the plate, short for the endless loop."""
    verifier = CadGeometryVerifier(CadGeometryConfig(timeout_s=3.0), pool_size=2)
    yield verifier
    verifier.close()


def grade(verifier: CadGeometryVerifier, programs: dict[str, str]) -> dict[str, Score]:
    scores = verifier.score_many([(TASK, f"```openscad\n{p}\n```") for p in programs.values()])
    return dict(zip(programs, scores, strict=True))


def test_the_reference_scores_one_deterministically(verifier: CadGeometryVerifier) -> None:
    first, second = verifier.score_many([(TASK, TASK.answer or "")] * 2)
    assert first == second and first.reward == 1.0 and first.passed
    assert first.details["genus"] == 4 and first.details["bounds_mm"] == [[0, 0, 0], [60, 40, 4]]
    assert verifier.score(TASK, f"```scad\n{BODY}\n```").passed  # the same part, written with numbers


BAD_INPUTS = {
    "endless loop": ("x = [for (i = [0 : 99999]) for (j = [0 : 99999]) if (i < 0) 0]; cube(1);", "timeout"),
    "empty object": ("cube(0);", "empty_mesh"),
    "empty difference": ("difference() { cube(1); cube(3, center = true); }", "empty_mesh"),
    "edge-touching cubes": ("cube(10); translate([10, 10, 0]) cube(10);", "not_manifold"),
    "nested shells": (NESTED_SHELLS, "self_overlapping"),
    "flat 2D": ("square(10);", "not_3d"),
    "syntax error": ("cube([60, 40, 4]", "compile_error"),
    "not UTF-8": ("cube([60, 40, \ud800]);", "compile_error"),
    "NUL byte": ("cube([60, \x00 40, 4]);", "compile_error"),
    "host STL": ('import("/usr/share/openscad/examples/Basics/LetterBlock.scad");', "file_access"),
    "host secret": ('import("/etc/passwd");', "file_access"),
    "library": ("include <MCAD/boxes.scad>\nroundedBox([60, 40, 4], 2);", "file_access"),
}


@pytest.fixture(scope="module")
def bad_scores(verifier: CadGeometryVerifier) -> dict[str, Score]:
    return grade(verifier, {name: program for name, (program, _) in BAD_INPUTS.items()})


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_a_model_failure_scoring_zero(bad_scores: dict[str, Score], name: str) -> None:
    score = bad_scores[name]
    assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL), score
    assert score.details["status"] == BAD_INPUTS[name][1], score.message


def test_a_mesh_over_the_output_cap_is_stopped_by_the_sandbox() -> None:
    small = CadGeometryVerifier(CadGeometryConfig(timeout_s=20.0, max_stl_mb=1), pool_size=1)
    try:
        # About 90,000 triangles, 4.5 MB of STL; the sandbox kills the run past the cap (and a 1 GB mesh
        # under the default cap the same way, or by time or memory first).
        score = small.score(TASK, "sphere(r = 10, $fn = 300);")
    finally:
        small.close()
    assert (score.reward, score.error, score.details["status"]) == (0.0, ErrorKind.MODEL, "mesh_too_large")


def test_the_sandbox_hides_host_files_that_get_past_the_static_check(
    verifier: CadGeometryVerifier, tmp_path: Path
) -> None:
    # The static check rejects `import`; run the pool directly, as a check that missed a construct would.
    secret = tmp_path / "reference.stl"
    secret.write_text("solid x\nendsolid x\n")
    pool = run_blocking(verifier._pool.get(), 60)
    result = run_blocking(pool.run(OPENSCAD, files={PROGRAM_FILE: f'import("{secret}");'}), 60)
    assert secret.exists() and result.status == "runtime_error" and not result.stdout
    assert b"Can't open" in result.stderr or b"not found" in result.stderr.lower(), result.stderr[-300:]


HACKS = {
    "moved 6 mm along x": f"translate([6, 0, 0]) {{\n{BODY}\n}}",
    "moved 1 mm up": f"translate([0, 0, 1]) {{\n{BODY}\n}}",
    "scaled by 1.1": f"scale(1.1) {{\n{BODY}\n}}",
    "scaled by 0.9 about its centre": f"translate([3, 2, 0.2]) scale(0.9) {{\n{BODY}\n}}",
    "holes left out": "cube([60, 40, 4]);",
    "holes in the wrong places": PLATE.with_value("inset", 12).source(),
    "hollow, right box": "difference() { cube([60, 40, 4]); translate([1, 1, 1]) cube([58, 38, 2]); }",
    "frame, right box": "difference() { cube([60, 40, 4]); translate([10, 10, -1]) cube([40, 20, 6]); }",
    "engulfing cube": "translate([-20, -20, -20]) cube([100, 80, 44]);",
    "the plate twice, side by side": f"{BODY}\ntranslate([61, 0, 0]) {{\n{BODY}\n}}",
}


@pytest.fixture(scope="module")
def hack_scores(verifier: CadGeometryVerifier) -> dict[str, Score]:
    return grade(verifier, HACKS)


@pytest.mark.parametrize("name", sorted(HACKS))
def test_geometric_hacks_stay_under_the_pass_threshold(hack_scores: dict[str, Score], name: str) -> None:
    score = hack_scores[name]
    assert not score.passed and score.reward < CadGeometryConfig().pass_threshold, score
    assert score.error is ErrorKind.MODEL and score.details["status"] == "ok"


def test_the_engulfing_cube_and_the_hollow_box_score_low(hack_scores: dict[str, Score]) -> None:
    for name in ("engulfing cube", "hollow, right box", "scaled by 1.1"):
        assert hack_scores[name].reward <= 0.35 and hack_scores[name].details["iou"] == 0.0, name
