"""Union / difference / intersection compositions (`3d/openscad/composite@<level>`).

easy: a block with a cylindrical peg standing on its top face (union). medium: a block with a round
boss on top and a through hole down the boss's axis (union, then difference). hard: a "rounded cube" —
the intersection of a cube and a sphere, both centred on the origin — with three orthogonal through
holes along the x, y and z axes (intersection, then difference).
"""

from __future__ import annotations

import random

from posttrain.tasks.families.cad.part import (
    Dimensions,
    Editable,
    Part,
    box,
    first_valid,
    half_steps,
    num,
    require,
)

ON_FLOOR = "one bottom corner of the block at the origin, the block extending along +x, +y and +z"
CENTRED = "centred on the origin"
MARGIN_MM = 1.5
GENUS_OF_THREE_CROSSING_HOLES = 5
"""Three orthogonal tunnels meeting in the middle of a solid: a genus-5 surface."""


def _block_text(v: Dimensions) -> str:
    return f"A solid block {num(v['length'])} mm (x) by {num(v['width'])} mm (y) by {num(v['height'])} mm (z)"


def pegged(v: Dimensions) -> Part:
    require(v["peg_diameter"] + 2 * MARGIN_MM <= min(v["length"], v["width"]) and v["peg_height"] > 0,
            "the peg does not fit the top face")  # fmt: skip
    body = ("union() {\n  cube([length, width, height]);\n"
            "  translate([length / 2, width / 2, height]) cylinder(h = peg_height, d = peg_diameter);\n}\n")  # fmt: skip
    text = (f"{_block_text(v)} with a solid cylindrical peg of diameter {num(v['peg_diameter'])} mm and height "
            f"{num(v['peg_height'])} mm standing on the centre of its top face.")
    edits = (Editable("height", "the block's height"), Editable("length", "the block's length (x)"))
    return Part("pegged block", v, body, text, ON_FLOOR, 0,
                box(v["length"], v["width"], v["height"] + v["peg_height"]), pegged, edits)  # fmt: skip


def bossed(v: Dimensions) -> Part:
    boss, hole = v["boss_diameter"], v["hole_diameter"]
    require(boss + 2 * MARGIN_MM <= min(v["length"], v["width"]) and v["boss_height"] > 0, "the boss does not fit")
    require(hole + 2 * MARGIN_MM <= boss, "the hole is wider than the boss")
    body = ("difference() {\n  union() {\n    cube([length, width, height]);\n"
            "    translate([length / 2, width / 2, height]) cylinder(h = boss_height, d = boss_diameter);\n  }\n"
            "  translate([length / 2, width / 2, -1]) cylinder(h = height + boss_height + 2, d = hole_diameter);\n}\n")  # fmt: skip
    text = (f"{_block_text(v)} with a round boss of diameter {num(boss)} mm and height {num(v['boss_height'])} mm on the "
            f"centre of its top face, and a through hole of diameter {num(hole)} mm down the boss's axis, through "
            "the boss and the block.")  # fmt: skip
    edits = (Editable("height", "the block's height"), Editable("width", "the block's width (y)"))
    return Part("bossed block", v, body, text, ON_FLOOR, 1,
                box(v["length"], v["width"], v["height"] + v["boss_height"]), bossed, edits)  # fmt: skip


def rounded_cube(v: Dimensions) -> Part:
    side, sphere, hole = v["side"], v["sphere_diameter"], v["hole_diameter"]
    require(side < sphere <= side * 1.6, "the sphere must round the corners, not the faces away")
    require(hole + 2 * MARGIN_MM <= side * 0.6, "the holes leave too little material")
    body = ("difference() {\n  intersection() {\n    cube(side, center = true);\n    sphere(d = sphere_diameter);\n  }\n"
            "  cylinder(h = side + 2, d = hole_diameter, center = true);\n"
            "  rotate([90, 0, 0]) cylinder(h = side + 2, d = hole_diameter, center = true);\n"
            "  rotate([0, 90, 0]) cylinder(h = side + 2, d = hole_diameter, center = true);\n}\n")  # fmt: skip
    text = (f"The intersection of a cube with {num(side)} mm sides and a sphere of diameter {num(sphere)} mm, both "
            f"centred on the origin, with three through holes of diameter {num(hole)} mm along the x, y and z "
            "axes.")
    edits = (Editable("side", "the cube's side"),)
    return Part("rounded cube", v, body, text, CENTRED, GENUS_OF_THREE_CROSSING_HOLES, None, rounded_cube, edits)


def _block(rng: random.Random) -> Dimensions:
    return {"length": half_steps(rng, 15, 60), "width": half_steps(rng, 15, 60), "height": half_steps(rng, 5, 30)}


def _easy(rng: random.Random) -> Part:
    return pegged({**_block(rng), "peg_diameter": half_steps(rng, 4, 30), "peg_height": half_steps(rng, 3, 30)})


def _medium(rng: random.Random) -> Part:
    return bossed({**_block(rng), "boss_diameter": half_steps(rng, 8, 30), "boss_height": half_steps(rng, 3, 20),
                   "hole_diameter": half_steps(rng, 3, 15)})  # fmt: skip


def _hard(rng: random.Random) -> Part:
    side = half_steps(rng, 15, 50)
    return rounded_cube({"side": side, "sphere_diameter": half_steps(rng, side * 1.2, side * 1.5),
                         "hole_diameter": half_steps(rng, 3, side / 2)})  # fmt: skip


def draw(level: str, rng: random.Random) -> Part:
    """A composite of `level`."""
    return first_valid(rng, {"easy": _easy, "medium": _medium, "hard": _hard}[level])
