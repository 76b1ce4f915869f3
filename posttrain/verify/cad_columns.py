"""Vertical rays through a triangle mesh: where they cross it, whether it bounds a solid, and the
volumetric IoU of two meshes measured along the rays.

A `Grid` is `n x n` vertical rays over a rectangle (ray centres slightly off the cell centres, so that
round dimensions do not put rays on the meshes' edges). `crossings` gives, per ray, every point where it
crosses a triangle and the sign of the crossing (+1 entering, -1 leaving, from the triangle's normal).
Along one ray the running sum of signs is the winding number of the mesh there: a proper solid has
winding 0 or 1 everywhere and 0 at the top. `winding_violations` counts the rays where it is anything
else: nested or overlapping shells of the same orientation (2), inverted shells (-1), open surfaces.
`column_iou` integrates |A and B| and |A or B| along every ray (the solid of each mesh being where its
winding is at least 1): a voxel IoU with exact lengths along z; `column_fill` integrates |A| and
|A or B| inside a box (for the void check of `cad_mesh.void_recall`).

Guarantees: pure numpy, deterministic, bounded work (`MAX_PAIRS`), total for any float triangles
(vertical triangles, degenerate ones and NaN are ignored); a ray through an edge or a vertex shared by triangles is counted once (the top-left
rule of rasterisation, with edge functions computed in a canonical vertex order so that the two
triangles of an edge get exactly opposite values). Not here: what counts as a good mesh (`cad_mesh.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
_JITTER = (0.5 + 0.01371, 0.5 + 0.02913)
"""Where in its cell a ray passes (x, y), off the centre by an amount no round dimension hits."""
_MIN_LENGTH_REL = 1e-9
"""Intervals shorter than this fraction of the grid's extent are ignored (ties of equal crossings)."""
MAX_PAIRS = 2_000_000
"""Ray-triangle candidate pairs above which the work is refused (`TooComplex`): a few hundred bytes of
working memory each. Meshes OpenSCAD makes of real parts stay far below (about one pair per ray per
surface crossed, plus each triangle's bounding box)."""


class TooComplex(ValueError):
    """The mesh would need more than `MAX_PAIRS` ray-triangle tests."""


@dataclass(frozen=True)
class Grid:
    """`n x n` vertical rays over [x0, x0 + n dx] x [y0, y0 + n dy]."""

    x0: float
    y0: float
    dx: float
    dy: float
    n: int

    @classmethod
    def over(cls, lo: Floats, hi: Floats, n: int) -> Grid:
        """A grid covering the xy extent from `lo` to `hi` (at least a small positive size per axis)."""
        size = np.maximum(np.asarray(hi[:2], float) - np.asarray(lo[:2], float), 1e-6)
        return cls(float(lo[0]), float(lo[1]), float(size[0] / n), float(size[1] / n), n)

    @property
    def extent(self) -> float:
        return float(max(self.dx, self.dy) * self.n)


@dataclass(frozen=True)
class Crossings:
    """Every ray-triangle crossing, sorted by ray and then by z."""

    ray: Ints
    z: Floats
    sign: Ints


def crossings(triangles: Floats, grid: Grid) -> Crossings:
    """Where the grid's rays cross `triangles` ([F, 3, 3]); `TooComplex` past `MAX_PAIRS` candidate pairs."""
    tri = np.asarray(triangles, dtype=np.float64).reshape(-1, 3, 3)
    xy = tri[:, :, :2]
    area2 = _cross(xy[:, 1] - xy[:, 0], xy[:, 2] - xy[:, 0])
    keep = np.isfinite(area2) & (area2 != 0)
    tri, xy, area2 = tri[keep], xy[keep], area2[keep]
    flip = area2 < 0  # order every projected triangle counter-clockwise; remember which faced down
    tri[flip] = tri[flip][:, [0, 2, 1]]
    xy = tri[:, :, :2]
    sign = np.where(flip, 1, -1)  # a down-facing triangle is where an upward ray enters the solid
    ix0, ix1 = _cell_range(xy[:, :, 0], grid.x0, grid.dx, _JITTER[0], grid.n)
    iy0, iy1 = _cell_range(xy[:, :, 1], grid.y0, grid.dy, _JITTER[1], grid.n)
    nx, ny = np.maximum(ix1 - ix0 + 1, 0), np.maximum(iy1 - iy0 + 1, 0)
    counts = nx * ny
    total = int(counts.sum())
    if total > MAX_PAIRS:
        raise TooComplex(f"{total} ray-triangle pairs (at most {MAX_PAIRS})")
    owner = np.repeat(np.arange(len(tri)), counts)
    offset = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    ix = ix0[owner] + offset % nx[owner]
    iy = iy0[owner] + offset // nx[owner]
    px = grid.x0 + (ix + _JITTER[0]) * grid.dx
    py = grid.y0 + (iy + _JITTER[1]) * grid.dy
    inside, bary = _inside(xy[owner], px, py)
    owner, bary = owner[inside], bary[inside]
    z = np.einsum("kj,kj->k", bary, tri[owner][:, :, 2]) / bary.sum(axis=1)
    ray = (iy * grid.n + ix)[inside]
    order = np.lexsort((z, ray))
    return Crossings(ray[order].astype(np.int64), z[order], sign[owner][order].astype(np.int64))


def _cross(u: Floats, v: Floats) -> Floats:
    return np.asarray(u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0], dtype=np.float64)


def _cell_range(coords: Floats, origin: float, step: float, jitter: float, n: int) -> tuple[Ints, Ints]:
    """The first and last cell index whose ray lies within each triangle's extent along one axis."""
    lo = np.ceil((coords.min(axis=1) - origin) / step - jitter)
    hi = np.floor((coords.max(axis=1) - origin) / step - jitter)
    return np.clip(lo, 0, n).astype(np.int64), np.clip(hi, -1, n - 1).astype(np.int64)


def _inside(xy: Floats, px: Floats, py: Floats) -> tuple[npt.NDArray[np.bool_], Floats]:
    """Which (counter-clockwise triangle, point) pairs hold the point, by the top-left rule, and the
    point's unnormalised barycentric weights (edge functions opposite each vertex)."""
    weights = []
    inside = np.ones(len(px), dtype=bool)
    for a, b, opposite in ((1, 2, 0), (2, 0, 1), (0, 1, 2)):
        ax, ay, bx, by = xy[:, a, 0], xy[:, a, 1], xy[:, b, 0], xy[:, b, 1]
        swap = (ax > bx) | ((ax == bx) & (ay > by))
        lx, ly = np.where(swap, bx, ax), np.where(swap, by, ay)
        hx, hy = np.where(swap, ax, bx), np.where(swap, ay, by)
        edge = (hx - lx) * (py - ly) - (hy - ly) * (px - lx)
        edge = np.where(swap, -edge, edge)
        top_left = ((ay == by) & (bx < ax)) | (by < ay)
        inside &= (edge > 0) | ((edge == 0) & top_left)
        weights.append((opposite, edge))
    bary = np.stack([w for _, w in sorted(weights, key=lambda item: item[0])], axis=1)
    return inside, bary


def winding_violations(found: Crossings, grid: Grid) -> int:
    """Rays along which the winding number leaves {0, 1} over a non-empty interval or ends non-zero."""
    if len(found.ray) == 0:
        return 0
    winding = _running_sum(found.ray, found.sign)
    last = np.r_[found.ray[1:] != found.ray[:-1], True]
    length = np.r_[found.z[1:] - found.z[:-1], 0.0]
    bad_interval = ~last & (length > _MIN_LENGTH_REL * grid.extent) & ((winding < 0) | (winding > 1))
    bad_end = last & (winding != 0)
    return len(np.unique(found.ray[bad_interval | bad_end]))


def _running_sum(ray: Ints, values: Ints) -> Ints:
    """The cumulative sum of `values` restarted at each new ray (`ray` sorted)."""
    total = np.cumsum(values)
    starts = np.r_[True, ray[1:] != ray[:-1]]
    first = np.maximum.accumulate(np.where(starts, np.arange(len(ray)), 0))
    return np.asarray(total - (total - values)[first], dtype=np.int64)


def column_volume(found: Crossings, grid: Grid) -> float:
    """The volume where the winding number is at least 1, integrated along the rays."""
    if len(found.ray) == 0:
        return 0.0
    winding = _running_sum(found.ray, found.sign)
    same = np.r_[found.ray[1:] == found.ray[:-1], False]
    length = np.r_[found.z[1:] - found.z[:-1], 0.0]
    return float(np.sum(length * (same & (winding >= 1)))) * grid.dx * grid.dy


def _merged(a: Floats, b: Floats, grid: Grid) -> tuple[Ints, Floats, Ints, Ints]:
    """Both meshes' crossings in one ray/z order: (ray, z, winding of A, winding of B) after each."""
    ca, cb = crossings(a, grid), crossings(b, grid)
    ray = np.r_[ca.ray, cb.ray]
    z = np.r_[ca.z, cb.z]
    order = np.lexsort((z, ray))
    ray, z = ray[order], z[order]
    wa = _running_sum(ray, np.r_[ca.sign, np.zeros_like(cb.sign)][order])
    wb = _running_sum(ray, np.r_[np.zeros_like(ca.sign), cb.sign][order])
    return ray, z, wa, wb


def _segments(ray: Ints, z: Floats, z_range: tuple[float, float] | None = None) -> Floats:
    """Length of the segment from each crossing to the next on its ray (0 at a ray's last), clipped to
    `z_range` when given."""
    same = np.r_[ray[1:] == ray[:-1], False]
    upper = np.r_[z[1:], 0.0]
    if z_range is not None:
        lower, upper = np.maximum(z, z_range[0]), np.minimum(upper, z_range[1])
        return np.where(same, np.maximum(upper - lower, 0.0), 0.0)
    return np.where(same, upper - z, 0.0)


def column_iou(a: Floats, b: Floats, grid: Grid) -> float:
    """|A and B| / |A or B| along the grid's rays, A and B being where each mesh's winding is >= 1."""
    ray, z, wa, wb = _merged(a, b, grid)
    length = _segments(ray, z)
    union = float(np.sum(length * ((wa >= 1) | (wb >= 1))))
    both = float(np.sum(length * ((wa >= 1) & (wb >= 1))))
    return both / union if union > 0 else 0.0


def column_fill(a: Floats, b: Floats, grid: Grid, z_range: tuple[float, float]) -> tuple[float, float]:
    """Volumes of A and of A or B inside the box the grid spans in x and y and `z_range` spans in z."""
    ray, z, wa, wb = _merged(a, b, grid)
    length = _segments(ray, z, z_range) * grid.dx * grid.dy
    return float(np.sum(length * (wa >= 1))), float(np.sum(length * ((wa >= 1) | (wb >= 1))))
