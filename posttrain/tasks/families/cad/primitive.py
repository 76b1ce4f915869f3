"""Primitives with exact dimensions (`3d/openscad/primitive@<level>`).

easy: a box with a corner at the origin, or a cylinder standing on the origin. medium: a box centred
on the origin, a cone frustum, or a sphere. hard: a tube (a cylinder with a coaxial bore), a hexagonal
prism given across flats, or a box turned about z. Every number is a multiple of 0.5 mm.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from posttrain.tasks.families.cad.part import Dimensions, Editable, Part, box, half_steps, num, require

CORNER = "one corner at the origin, the part extending along +x, +y and +z"
STANDING = "its axis on the z axis, its base on the plane z = 0"
CENTRED = "centred on the origin"


def block(v: Dimensions) -> Part:
    require(min(v.values()) > 0, "sizes must be positive")
    return Part("box", v, "cube([length, width, height]);\n",
                f"A solid rectangular box {num(v['length'])} mm long (x), {num(v['width'])} mm wide (y) and "
                f"{num(v['height'])} mm high (z).", CORNER, 0, box(v["length"], v["width"], v["height"]), block,
                (Editable("length", "the box's length (x)"), Editable("height", "the box's height (z)")))  # fmt: skip


def cylinder(v: Dimensions) -> Part:
    require(min(v.values()) > 0, "sizes must be positive")
    r, h = v["diameter"] / 2, v["height"]
    return Part("cylinder", v, "cylinder(h = height, d = diameter);\n",
                f"A solid cylinder of diameter {num(v['diameter'])} mm and height {num(h)} mm.", STANDING, 0,
                ((-r, -r, 0.0), (r, r, h)), cylinder,
                (Editable("diameter", "the cylinder's diameter"), Editable("height", "the cylinder's height")))  # fmt: skip


def centred_block(v: Dimensions) -> Part:
    require(min(v.values()) > 0, "sizes must be positive")
    x, y, z = v["length"], v["width"], v["height"]
    return Part("centred box", v, "cube([length, width, height], center = true);\n",
                f"A solid rectangular box {num(x)} mm along x, {num(y)} mm along y and {num(z)} mm along z.",
                CENTRED, 0, box(x, y, z, -x / 2, -y / 2, -z / 2), centred_block)  # fmt: skip


def frustum(v: Dimensions) -> Part:
    require(min(v.values()) > 0 and v["bottom_diameter"] != v["top_diameter"], "a frustum needs two diameters")
    r = max(v["bottom_diameter"], v["top_diameter"]) / 2
    return Part("cone frustum", v, "cylinder(h = height, d1 = bottom_diameter, d2 = top_diameter);\n",
                f"A solid cone frustum {num(v['height'])} mm high, {num(v['bottom_diameter'])} mm in diameter at "
                f"the bottom and {num(v['top_diameter'])} mm at the top.", STANDING, 0,
                ((-r, -r, 0.0), (r, r, v["height"])), frustum)  # fmt: skip


def ball(v: Dimensions) -> Part:
    require(v["diameter"] > 0, "the diameter must be positive")
    return Part("sphere", v, "sphere(d = diameter);\n", f"A solid sphere of diameter {num(v['diameter'])} mm.",
                CENTRED, 0, None, ball)  # fmt: skip


def tube(v: Dimensions) -> Part:
    od, bore, h = v["outer_diameter"], v["bore"], v["height"]
    require(0 < bore <= od - 2 and h > 0, "the bore must leave a wall of at least 1 mm")
    body = ("difference() {\n  cylinder(h = height, d = outer_diameter);\n"
            "  translate([0, 0, -1]) cylinder(h = height + 2, d = bore);\n}\n")  # fmt: skip
    return Part("tube", v, body,
                f"A tube {num(h)} mm long with outer diameter {num(od)} mm and a coaxial through bore of "
                f"diameter {num(bore)} mm.", STANDING, 1, ((-od / 2, -od / 2, 0.0), (od / 2, od / 2, h)), tube,
                (Editable("height", "the tube's length"), Editable("outer_diameter", "the tube's outer diameter")))  # fmt: skip


def hex_prism(v: Dimensions) -> Part:
    flats, h = v["across_flats"], v["height"]
    require(flats > 0 and h > 0, "sizes must be positive")
    corner = flats / math.sqrt(3)
    return Part("hexagonal prism", v, "cylinder(h = height, d = across_flats / cos(30), $fn = 6);\n",
                f"A regular hexagonal prism {num(h)} mm high measuring {num(flats)} mm across flats, with two "
                "of its corners on the x axis.", STANDING, 0,
                ((-corner, -flats / 2, 0.0), (corner, flats / 2, h)), hex_prism)  # fmt: skip


def turned_block(v: Dimensions) -> Part:
    require(min(v["length"], v["width"], v["height"]) > 0, "sizes must be positive")
    body = "rotate([0, 0, angle]) cube([length, width, height], center = true);\n"
    return Part("turned box", v, body,
                f"A solid rectangular box {num(v['length'])} x {num(v['width'])} x {num(v['height'])} mm "
                f"(x, y, z before turning), centred on the origin and then turned {num(v['angle'])} degrees "
                "about the z axis (counter-clockwise seen from +z).", CENTRED, 0, None, turned_block)  # fmt: skip


def _box_dims(rng: random.Random) -> Dimensions:
    return {"length": half_steps(rng, 8, 60), "width": half_steps(rng, 8, 60), "height": half_steps(rng, 4, 40)}


def _tube_dims(rng: random.Random) -> Dimensions:
    outer = half_steps(rng, 14, 50)
    return {"outer_diameter": outer, "bore": half_steps(rng, 4, outer - 4), "height": half_steps(rng, 6, 50)}


DRAWS: dict[str, tuple[Callable[[random.Random], Part], ...]] = {
    "easy": (
        lambda rng: block(_box_dims(rng)),
        lambda rng: cylinder({"diameter": half_steps(rng, 6, 50), "height": half_steps(rng, 4, 40)}),
    ),
    "medium": (
        lambda rng: centred_block(_box_dims(rng)),
        lambda rng: frustum({"height": half_steps(rng, 8, 40), "bottom_diameter": half_steps(rng, 20, 50),
                             "top_diameter": half_steps(rng, 4, 18)}),  # fmt: skip
        lambda rng: ball({"diameter": half_steps(rng, 8, 50)}),
    ),
    "hard": (
        lambda rng: tube(_tube_dims(rng)),
        lambda rng: hex_prism({"across_flats": half_steps(rng, 8, 40), "height": half_steps(rng, 3, 30)}),
        lambda rng: turned_block({**_box_dims(rng), "angle": float(rng.choice((15, 30, 45, 60)))}),
    ),
}


def draw(level: str, rng: random.Random) -> Part:
    """A primitive of `level`."""
    return rng.choice(DRAWS[level])(rng)
