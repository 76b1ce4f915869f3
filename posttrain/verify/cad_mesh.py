"""A binary STL read back from OpenSCAD, checked to be a solid, and compared with another solid.

`read_stl` parses binary STL bytes (already bounded by the sandbox's output cap) into triangles, refusing
anything whose length does not match its triangle count (a count of 0 is read from the length: OpenSCAD
writing to a pipe cannot go back to fill it in). `load_solid` turns triangles into a `Solid`
with trimesh (vertices merged): it raises `MeshError` when the mesh is empty, not watertight, not
consistently wound, of non-positive volume, or when rays through it find winding numbers outside
{0, 1} (nested or overlapping shells: `cad_columns.py`), since the volume and the IoU of such a mesh
mean nothing. A `Solid` carries its volume, bounds, number of shells and genus (from the Euler
characteristic: V - E + F = 2 (shells - genus)), and a manifold3d `Manifold` when manifold3d is
installed. `void_recall` is the share of the reference's empty space (inside its bounding box) that the
candidate leaves empty too. `iou` is the exact volumetric IoU by manifold3d booleans (`auto`), or the ray-column estimate when
either solid has no `Manifold` or when asked for (`columns`).

Guarantees: never reads more than the bytes given; deterministic. trimesh and manifold3d are imported on
first use (the `cad` extra), so importing this module needs neither. Not here: running OpenSCAD
(`cad.py`) or turning the comparison into a reward (`cad_score.py`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from posttrain.verify.cad_columns import (
    Floats,
    Grid,
    TooComplex,
    column_fill,
    column_iou,
    crossings,
    winding_violations,
)

STL_HEADER_BYTES = 84
STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("vertices", "<f4", (3, 3)), ("attribute", "<u2")])
MAX_COORDINATE_MM = 1e6
"""Coordinates further from the origin than a kilometre are refused (their volumes overflow nothing, but
no part is that big)."""
MIN_VOID_FRACTION = 1e-6
"""A reference whose empty space is under this share of its bounding box has no voids to match."""
MAX_BAD_RAY_FRACTION = 0.002
"""Rays with a bad winding number tolerated (float rounding of a valid mesh), as a share of the grid."""
IouMethod = Literal["auto", "columns"]


class MeshError(ValueError):
    """The mesh is not a solid; `reason` is a short code (`empty_mesh`, `not_manifold`, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def mesh_libraries() -> tuple[bool, bool]:
    """Whether trimesh and manifold3d are importable."""
    return importlib.util.find_spec("trimesh") is not None, importlib.util.find_spec("manifold3d") is not None


def read_stl(data: bytes) -> Floats:
    """The triangles ([F, 3, 3] float64) of binary STL `data`; MeshError when it is not one."""
    if len(data) < STL_HEADER_BYTES:
        raise MeshError("bad_stl" if data else "empty_mesh", f"{len(data)} bytes is not a binary STL")
    count = int.from_bytes(data[80:84], "little")
    if count == 0 and (len(data) - STL_HEADER_BYTES) % STL_RECORD.itemsize == 0:
        count = (len(data) - STL_HEADER_BYTES) // STL_RECORD.itemsize  # a stream cannot seek back to the count
    if len(data) != STL_HEADER_BYTES + count * STL_RECORD.itemsize:
        raise MeshError("bad_stl", f"{len(data)} bytes do not hold {count} triangles")
    if count == 0:
        raise MeshError("empty_mesh", "the mesh has no triangles")
    records = np.frombuffer(data, dtype=STL_RECORD, count=count, offset=STL_HEADER_BYTES)
    triangles = records["vertices"].astype(np.float64)
    if not np.isfinite(triangles).all():
        raise MeshError("bad_stl", "the mesh has non-finite coordinates")
    if np.abs(triangles).max() > MAX_COORDINATE_MM:
        raise MeshError("bad_stl", f"the mesh has coordinates beyond {MAX_COORDINATE_MM:g} mm")
    return triangles


@dataclass(frozen=True)
class Solid:
    """A closed, consistently wound mesh and the facts the score compares."""

    triangles: Floats
    """[F, 3, 3] float64, as exported."""
    volume_mm3: float
    lo_mm: Floats
    """Bounding-box minimum corner [3]."""
    hi_mm: Floats
    """Bounding-box maximum corner [3]."""
    shells: int
    """Connected components of the surface."""
    genus: int
    """Total genus: through holes and handles."""
    manifold: Any = None
    """A manifold3d `Manifold`, or None without manifold3d (or when it refused the mesh)."""

    @property
    def size_mm(self) -> Floats:
        return np.asarray(self.hi_mm - self.lo_mm, dtype=np.float64)


def load_solid(triangles: Floats, columns: int = 64, use_manifold: bool = True) -> Solid:
    """Check `triangles` bound a solid and measure it; MeshError (with a reason) when they do not."""
    import trimesh

    count = len(triangles)
    mesh = trimesh.Trimesh(vertices=triangles.reshape(-1, 3), faces=np.arange(3 * count).reshape(-1, 3),
                           process=True, validate=False)  # fmt: skip
    if len(mesh.faces) == 0:
        raise MeshError("empty_mesh", "the mesh has no faces")
    if not mesh.is_watertight:
        raise MeshError("not_manifold", "the mesh is not watertight (open edges or edges of more than two faces)")
    if not mesh.is_winding_consistent:
        raise MeshError("not_manifold", "the mesh's faces are not consistently wound")
    volume = float(mesh.volume)
    if not volume > 0:
        raise MeshError("not_manifold", f"the mesh encloses volume {volume:.6g} (inside out or flat)")
    grid = Grid.over(mesh.bounds[0], mesh.bounds[1], columns)
    try:
        bad = winding_violations(crossings(triangles, grid), grid)
    except TooComplex as exc:
        raise MeshError("too_complex", str(exc)) from None
    if bad > MAX_BAD_RAY_FRACTION * columns * columns:
        raise MeshError("self_overlapping", f"{bad} rays cross nested, overlapping or inverted shells")
    shells = _count_shells(np.asarray(mesh.faces), len(mesh.vertices))
    genus = shells - int(mesh.euler_number) // 2
    manifold = _manifold(np.asarray(mesh.vertices), np.asarray(mesh.faces)) if use_manifold else None
    return Solid(triangles, volume, np.asarray(mesh.bounds[0], float), np.asarray(mesh.bounds[1], float),
                 shells, genus, manifold)  # fmt: skip


def _count_shells(faces: np.ndarray, num_vertices: int) -> int:
    """Connected components of the face graph: label propagation with pointer jumping (numpy only)."""
    label = np.arange(num_vertices)
    u = faces.reshape(-1)
    v = faces[:, [1, 2, 0]].reshape(-1)
    while True:
        lu, lv = label[u], label[v]
        if np.array_equal(lu, lv):
            break
        low = np.minimum(lu, lv)
        np.minimum.at(label, lu, low)
        np.minimum.at(label, lv, low)
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
    return len(np.unique(label[u]))


def _manifold(vertices: np.ndarray, faces: np.ndarray) -> Any:
    """A manifold3d `Manifold` of the mesh, or None when manifold3d is missing or refuses the mesh (the
    column estimate is used then, so a mesh manifold3d cannot take is never blamed on the grader)."""
    if not mesh_libraries()[1]:
        return None
    import manifold3d

    try:
        mesh = manifold3d.Mesh(np.ascontiguousarray(vertices, dtype=np.float32),
                               np.ascontiguousarray(faces, dtype=np.uint32))  # fmt: skip
        solid = manifold3d.Manifold(mesh)
        return solid if solid.status() == manifold3d.Error.NoError else None
    except Exception:  # noqa: BLE001 - whatever it objects to, the rays can still measure the mesh
        return None


def iou(a: Solid, b: Solid, method: IouMethod = "auto", columns: int = 64) -> tuple[float, str]:
    """The volumetric IoU of two solids, and the method that measured it (`manifold` or `columns`);
    MeshError (`too_complex`) when the rays would cost too much."""
    if method != "columns" and a.manifold is not None and b.manifold is not None:
        both = float((a.manifold ^ b.manifold).volume())
        union = float(a.manifold.volume()) + float(b.manifold.volume()) - both
        if np.isfinite(both) and union > 0:
            return both / union, "manifold"
    grid = Grid.over(np.minimum(a.lo_mm, b.lo_mm), np.maximum(a.hi_mm, b.hi_mm), columns)
    try:
        return column_iou(a.triangles, b.triangles, grid), "columns"
    except TooComplex as exc:
        raise MeshError("too_complex", str(exc)) from None


def void_recall(candidate: Solid, reference: Solid, method: IouMethod = "auto", columns: int = 64) -> float:
    """The share of the empty space inside the reference's bounding box (its holes, pockets and cavities,
    and what lies beside its curved faces) that the candidate leaves empty too; 1.0 for a reference that
    fills its box. Holes of the right number in the wrong places score low here while barely moving the
    IoU. MeshError (`too_complex`) when the rays would cost too much."""
    box_mm3 = float(np.prod(reference.size_mm))
    if method != "columns" and candidate.manifold is not None and reference.manifold is not None:
        import manifold3d

        box = manifold3d.Manifold.cube(reference.size_mm.tolist()).translate(reference.lo_mm.tolist())
        reference_mm3 = float(reference.manifold.volume())
        filled_mm3 = float(((candidate.manifold + reference.manifold) ^ box).volume())
    else:
        grid = Grid.over(reference.lo_mm, reference.hi_mm, columns)
        box_mm3 = grid.dx * grid.dy * grid.n * grid.n * float(reference.size_mm[2])
        try:
            reference_mm3, filled_mm3 = column_fill(reference.triangles, candidate.triangles, grid,
                                                    (float(reference.lo_mm[2]), float(reference.hi_mm[2])))  # fmt: skip
        except TooComplex as exc:
            raise MeshError("too_complex", str(exc)) from None
    void_mm3 = box_mm3 - reference_mm3
    if not void_mm3 > MIN_VOID_FRACTION * box_mm3:
        return 1.0
    return float(min(1.0, max(0.0, (box_mm3 - filled_mm3) / void_mm3)))
