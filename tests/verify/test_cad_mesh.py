"""Meshes read back from STL: what counts as a solid, its topology, the ray-column winding check, both
IoU methods, and the sub-scores built on them. Meshes are made with trimesh, so no OpenSCAD is needed."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from posttrain.types import ErrorKind
from posttrain.verify import cad_columns
from posttrain.verify.cad_columns import Grid, _inside, column_volume, crossings, winding_violations
from posttrain.verify.cad_mesh import MeshError, Solid, _manifold, iou, load_solid, read_stl, void_recall
from posttrain.verify.cad_score import failure, geometry_score
from posttrain.verify.configs import Band, CadGeometryConfig, CadWeights

trimesh: Any = pytest.importorskip("trimesh")
pytest.importorskip("manifold3d")


def stl(mesh: Any, count_in_header: bool = True) -> bytes:
    """Binary STL of a trimesh mesh (the count left 0, as OpenSCAD writes to a pipe, unless asked)."""
    tri = np.asarray(mesh.triangles, dtype="<f4")
    records = np.zeros(len(tri), dtype=[("n", "<f4", (3,)), ("v", "<f4", (3, 3)), ("a", "<u2")])
    records["v"] = tri
    count = len(tri) if count_in_header else 0
    return b"\0" * 80 + count.to_bytes(4, "little") + records.tobytes()


def solid(mesh: Any, **kwargs: Any) -> Solid:
    return load_solid(read_stl(stl(mesh)), **kwargs)


def box(x: float, y: float, z: float, at: tuple[float, float, float] = (0, 0, 0)) -> Any:
    return trimesh.creation.box([x, y, z]).apply_translation(np.add([x / 2, y / 2, z / 2], at))


# ------------------------------------------------------------------ reading STL
def test_the_triangle_count_comes_from_the_header_or_the_length() -> None:
    mesh = box(2, 3, 4)
    assert read_stl(stl(mesh)).shape == (12, 3, 3)
    assert np.array_equal(read_stl(stl(mesh, count_in_header=False)), read_stl(stl(mesh)))


@pytest.mark.parametrize("data, reason", [
    (b"", "empty_mesh"), (b"\0" * 84, "empty_mesh"), (b"\0" * 80 + (5).to_bytes(4, "little") + b"\0" * 50, "bad_stl"),
    (b"solid ascii\nfacet normal 0 0 1\n", "bad_stl"),
])  # fmt: skip
def test_bytes_that_are_not_a_binary_stl_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(MeshError) as err:
        read_stl(data)
    assert err.value.reason == reason


@pytest.mark.parametrize("value, match", [(np.nan, "non-finite"), (np.inf, "non-finite"), (3e7, "beyond")])
def test_non_finite_or_absurd_coordinates_are_refused(value: float, match: str) -> None:
    data = bytearray(stl(box(1, 1, 1)))
    data[84 + 12 : 84 + 16] = np.float32(value).tobytes()
    with pytest.raises(MeshError, match=match):
        read_stl(bytes(data))


def test_a_mesh_too_costly_to_ray_trace_is_the_models_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cad_columns, "MAX_PAIRS", 100)
    with pytest.raises(MeshError) as err:
        solid(box(10, 10, 10))
    assert err.value.reason == "too_complex"


def test_a_mesh_manifold3d_refuses_is_measured_by_the_rays() -> None:
    assert _manifold(np.zeros((3, 3)), np.array([[0, 1, 2], [0, 1, 2]])) is None
    a = solid(box(10, 10, 10))
    b = solid(box(10, 10, 10, at=(5, 0, 0)))
    value, method = iou(a, replace(b, manifold=None))
    assert method == "columns" and value == pytest.approx(1 / 3, abs=0.02)


# ------------------------------------------------------------------ what is a solid
def test_a_box_is_a_solid_with_its_volume_bounds_and_topology() -> None:
    s = solid(box(2, 3, 4, at=(1, 0, -1)))
    assert s.volume_mm3 == pytest.approx(24) and s.shells == 1 and s.genus == 0
    assert s.lo_mm.tolist() == [1, 0, -1] and s.hi_mm.tolist() == [3, 3, 3]


def test_genus_counts_through_holes_and_shells_count_separate_bodies() -> None:
    ring = trimesh.creation.annulus(r_min=2, r_max=4, height=3, sections=32)
    assert (solid(ring).genus, solid(ring).shells) == (1, 1)
    two = trimesh.util.concatenate([box(1, 1, 1), box(1, 1, 1, at=(5, 0, 0))])
    assert (solid(two).genus, solid(two).shells) == (0, 2)


def test_an_open_mesh_is_not_a_solid() -> None:
    mesh = box(1, 1, 1)
    open_mesh = trimesh.Trimesh(mesh.vertices, mesh.faces[:-1])
    with pytest.raises(MeshError) as err:
        solid(open_mesh)
    assert err.value.reason == "not_manifold"


def test_an_inside_out_mesh_is_not_a_solid() -> None:
    mesh = box(1, 1, 1)
    mesh.invert()
    with pytest.raises(MeshError, match="inside out"):
        solid(mesh)


def test_nested_and_overlapping_shells_are_caught_by_the_winding_check() -> None:
    # Watertight, consistently wound and of positive signed volume: only the rays see the double cover.
    nested = trimesh.util.concatenate([box(10, 10, 10), box(4, 4, 4, at=(3, 3, 3))])
    overlapping = trimesh.util.concatenate([box(10, 10, 10), box(10, 10, 10, at=(5, 0, 0))])
    for mesh in (nested, overlapping):
        assert mesh.is_watertight and mesh.is_winding_consistent and mesh.volume > 0
        with pytest.raises(MeshError) as err:
            solid(mesh)
        assert err.value.reason == "self_overlapping"


# ------------------------------------------------------------------ rays
def test_rays_measure_a_box_exactly_and_a_cylinder_closely() -> None:
    for mesh, rel in ((box(10, 6, 4), 1e-9), (trimesh.creation.cylinder(radius=3, height=5, sections=48), 0.01)):
        grid = Grid.over(mesh.bounds[0], mesh.bounds[1], 64)
        found = crossings(mesh.triangles, grid)
        assert winding_violations(found, grid) == 0
        assert column_volume(found, grid) == pytest.approx(mesh.volume, rel=rel)


def test_a_point_on_a_shared_edge_belongs_to_exactly_one_triangle() -> None:
    # The unit square as two counter-clockwise triangles sharing the diagonal; points on the diagonal,
    # on the outer edges and at the corners.
    xy = np.array([[[0, 0], [1, 0], [1, 1]], [[0, 0], [1, 1], [0, 1]]], dtype=np.float64)
    points = np.array([[0.25, 0.25], [0.5, 0.5], [0.3, 0.3], [0.5, 0.0], [0.0, 0.5], [1.0, 0.5], [0.5, 1.0]])
    for px, py in points:
        inside, _ = _inside(xy, np.full(2, px), np.full(2, py))
        assert inside.sum() <= 1
        if 0 < px < 1 and 0 < py < 1:
            assert inside.sum() == 1, (px, py)


def test_the_two_iou_methods_agree() -> None:
    a, b = solid(box(10, 10, 10)), solid(box(10, 10, 10, at=(2, 0, 0)))
    exact, method = iou(a, b)
    assert method == "manifold" and exact == pytest.approx(8 / 12)
    estimate, method = iou(a, b, "columns", columns=128)
    assert method == "columns" and estimate == pytest.approx(8 / 12, abs=0.01)


def test_iou_of_a_solid_with_itself_is_one() -> None:
    a = solid(trimesh.creation.annulus(r_min=2, r_max=4, height=3, sections=32))
    assert iou(a, a)[0] == pytest.approx(1.0)
    assert iou(a, a, "columns")[0] == pytest.approx(1.0)


# ------------------------------------------------------------------ sub-scores
def test_a_band_is_one_up_to_ok_and_zero_from_zero() -> None:
    band = Band(ok=0.1, zero=0.3)
    assert [band.score(e) for e in (0.0, 0.1, 0.2, 0.3, 5.0)] == pytest.approx([1.0, 1.0, 0.5, 0.0, 0.0])
    assert band.score(math.nan) == 0.0
    with pytest.raises(ValueError):
        Band(ok=0.3, zero=0.3)
    with pytest.raises(ValueError):
        CadWeights(volume=0, bbox=0, features=0, voids=0, iou=0)


def test_the_reference_against_itself_scores_exactly_one() -> None:
    ref = solid(box(20, 10, 5))
    score = geometry_score(ref, ref, 1.0, "manifold", 1.0, CadGeometryConfig())
    names = ("compiles", "manifold", "volume", "bbox", "features", "voids", "iou")
    assert score.reward == 1.0 and score.passed and {k: score.details[k] for k in names} == dict.fromkeys(names, 1.0)


def test_sub_scores_combine_by_the_configured_weights() -> None:
    # A 10 % longer box: volume error 0.1 (band 0.02..0.1 -> 0), corner error 2 / |(20, 10, 5)| = 0.087
    # (band 0.01..0.05 -> 0), same topology (1), the reference fills its box so no void to miss (1),
    # IoU 1 / 1.1 -> 1 - IoU = 0.0909 (band 0.02..0.2 -> 1 - 0.0709 / 0.18 = 0.606).
    # Default weights (0.1, 0.15, 0.15, 0.15, 0.45): 0.15 + 0.15 + 0.45 * 0.606 = 0.573.
    ref, longer = solid(box(20, 10, 5)), solid(box(22, 10, 5))
    value, method = iou(longer, ref)
    voids = void_recall(longer, ref)
    score = geometry_score(longer, ref, value, method, voids, CadGeometryConfig())
    assert voids == 1.0
    assert score.reward == pytest.approx(0.15 + 0.15 + 0.45 * (1 - (1 - 1 / 1.1 - 0.02) / 0.18), abs=1e-6)
    assert not score.passed and score.error is ErrorKind.MODEL
    only_topology = CadGeometryConfig(weights=CadWeights(volume=0, bbox=0, features=1, voids=0, iou=0),
                                      pass_threshold=1.0)  # fmt: skip
    assert geometry_score(longer, ref, value, method, voids, only_topology).passed


def plate(hole_at: tuple[float, float] | None) -> Any:
    """A 40 x 30 x 4 plate, with one 4 mm hole centred at `hole_at`."""
    body = box(40, 30, 4)
    if hole_at is None:
        return body
    drill = trimesh.creation.cylinder(radius=2, height=10, sections=32).apply_translation([*hole_at, 2])
    return trimesh.boolean.difference([body, drill], engine="manifold")


def test_voids_find_holes_in_the_wrong_places() -> None:
    # A 4 mm hole moved 20 mm changes the IoU by about 2 %, and no hole is missing; the voids see it.
    ref, moved, none = solid(plate((10, 15))), solid(plate((30, 15))), solid(plate(None))
    assert iou(moved, ref)[0] > 0.97 and moved.genus == ref.genus == 1
    for method in ("auto", "columns"):
        assert void_recall(ref, ref, method) == pytest.approx(1.0, abs=0.01)  # type: ignore[arg-type]
        assert void_recall(moved, ref, method) == pytest.approx(0.0, abs=0.02)  # type: ignore[arg-type]
        assert void_recall(none, ref, method) == pytest.approx(0.0, abs=0.02)  # type: ignore[arg-type]
        half = solid(plate((11, 15)))  # moved by half the hole's radius: about half of it still empty
        assert 0.3 < void_recall(half, ref, method) < 0.8  # type: ignore[arg-type]


def test_a_failure_scores_zero_with_every_sub_score() -> None:
    score = failure("timeout", "too slow", False, run="timeout_wall")
    assert score.reward == 0.0 and score.error is ErrorKind.MODEL and score.details["status"] == "timeout"
    assert score.details["compiles"] == 0.0 and score.details["iou"] == 0.0
