"""The reward of a rendered solid against the reference solid: weighted sub-scores, two gates.

Gates: the program must compile to a mesh and the mesh must be a solid (`cad_mesh.load_solid`); failing
either scores 0 with the reason as `details["status"]`. Past the gates, each sub-score is in [0, 1]:
- `volume`: `volume_tol` on |V - V_ref| / V_ref;
- `bbox`: `bbox_tol` on the largest deviation of any bounding-box corner coordinate, divided by the
  reference's bounding-box diagonal (position counts: the prompt fixes where the part sits);
- `features`: 1 when the number of shells and the genus (through holes) both equal the reference's, else 0;
- `voids`: `voids_tol` on 1 - the share of the reference's empty space inside its bounding box that the
  candidate leaves empty (`cad_mesh.void_recall`): the right number of holes in the wrong places;
- `iou`: `iou_tol` on 1 - IoU with the reference solid.
The reward is their weighted mean (`CadWeights`), passed when it reaches `pass_threshold`. With the
default weights a solid whose IoU is under 0.8 scores at most 0.55, and one whose holes are all in the
wrong places at most 0.85, so neither can pass.

Guarantees: pure; the reference scored against itself gets exactly 1.0; `details` holds every
sub-score and the measurements behind it. Not here: rendering or reading meshes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from posttrain.types import Score
from posttrain.verify.cad_mesh import Solid
from posttrain.verify.configs import CadGeometryConfig

GATES = ("compiles", "manifold")
SUB_SCORES = ("volume", "bbox", "features", "voids", "iou")


def failure(status: str, message: str, compiles: bool, **details: Any) -> Score:
    """A model failure before the geometry is compared: reward 0, every sub-score 0."""
    subs = {"compiles": float(compiles), "manifold": 0.0, **dict.fromkeys(SUB_SCORES, 0.0)}
    return Score.wrong(0.0, f"{status}: {message}"[:500], status=status, **subs, **details)


def geometry_score(candidate: Solid, reference: Solid, iou_value: float, iou_method: str, void_share: float,
                   config: CadGeometryConfig) -> Score:  # fmt: skip
    """The weighted sub-scores of `candidate` against `reference`."""
    volume_error = abs(candidate.volume_mm3 - reference.volume_mm3) / reference.volume_mm3
    diagonal = float(np.linalg.norm(reference.size_mm))
    corner_error_mm = float(max(np.abs(candidate.lo_mm - reference.lo_mm).max(),
                                np.abs(candidate.hi_mm - reference.hi_mm).max()))  # fmt: skip
    same_topology = candidate.shells == reference.shells and candidate.genus == reference.genus
    subs = {
        "volume": config.volume_tol.score(volume_error),
        "bbox": config.bbox_tol.score(corner_error_mm / diagonal if diagonal > 0 else math.inf),
        "features": 1.0 if same_topology else 0.0,
        "voids": config.voids_tol.score(1.0 - void_share),
        "iou": config.iou_tol.score(1.0 - iou_value),
    }
    weights = config.weights.model_dump()
    total = sum(weights[name] for name in SUB_SCORES)
    reward = sum(weights[name] * subs[name] for name in SUB_SCORES) / total
    reward = min(1.0, max(0.0, round(reward, 9)))
    details = {
        "status": "ok", "compiles": 1.0, "manifold": 1.0, **subs,
        "volume_mm3": round(candidate.volume_mm3, 6), "reference_volume_mm3": round(reference.volume_mm3, 6),
        "bbox_error_mm": round(corner_error_mm, 6), "iou_value": round(iou_value, 6), "iou_method": iou_method,
        "void_share": round(void_share, 6),
        "bounds_mm": [np.round(candidate.lo_mm, 6).tolist(), np.round(candidate.hi_mm, 6).tolist()],
        "shells": candidate.shells, "genus": candidate.genus,
        "reference_shells": reference.shells, "reference_genus": reference.genus,
    }  # fmt: skip
    if reward >= config.pass_threshold:
        return Score.correct(reward, **details)
    weakest = min(SUB_SCORES, key=lambda name: subs[name])
    return Score.wrong(reward, f"geometry differs from the reference (weakest: {weakest})", **details)
