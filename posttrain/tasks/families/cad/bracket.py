"""L-brackets from a parametric spec (`3d/openscad/bracket@<level>`).

A base leg lies on z = 0 along +x, an upright leg rises along +z at x = 0; both are `width` deep along y
and `thickness` thick. easy: the bare L. medium: two through holes in the base leg. hard: two holes in
the base leg, two through the upright (along x) and a triangular gusset in the inner corner, centred
in y.
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

PLACEMENT = ("the base leg's bottom face on z = 0 and its back (the outer face of the upright) on x = 0, the "
             "bracket spanning y = 0 to y = width")  # fmt: skip
MARGIN_MM = 1.5
NEWLINE = "\n"
L_SHAPE = ("  cube([base_length, width, thickness]);\n"
           "  cube([thickness, width, height]);\n")  # fmt: skip
BASE_HOLES = ("  for (y = [width / 4, 3 * width / 4])\n"
              "    translate([hole_x, y, -1]) cylinder(h = thickness + 2, d = hole_diameter);\n")  # fmt: skip
EDITS = (Editable("height", "the upright leg's height"), Editable("base_length", "the base leg's length (x)"),
         Editable("width", "the bracket's width (y)"))  # fmt: skip


def _text(v: Dimensions) -> str:
    return (f"An L-shaped bracket {num(v['width'])} mm wide (y) made of {num(v['thickness'])} mm thick stock: a base "
            f"leg {num(v['base_length'])} mm long along x and an upright leg {num(v['height'])} mm tall along z, "
            "both measured from the outside of the corner.")  # fmt: skip


def _check_legs(v: Dimensions) -> None:
    require(v["thickness"] > 0 and v["base_length"] >= 3 * v["thickness"], "the base leg is too short")
    require(v["height"] >= 3 * v["thickness"], "the upright is too short")


def _check_base_holes(v: Dimensions) -> None:
    d = v["hole_diameter"]
    require(v["hole_x"] - d / 2 >= v["thickness"] + MARGIN_MM, "a base hole cuts into the upright")
    require(v["hole_x"] + d / 2 + MARGIN_MM <= v["base_length"], "a base hole leaves the base")
    require(v["width"] / 4 - d / 2 >= MARGIN_MM, "the base holes are too close to the sides")


def plain(v: Dimensions) -> Part:
    _check_legs(v)
    return Part("L-bracket", v, f"union() {{\n{L_SHAPE}}}\n", f"{_text(v)}", PLACEMENT, 0,
                box(v["base_length"], v["width"], v["height"]), plain, EDITS)  # fmt: skip


def drilled(v: Dimensions) -> Part:
    _check_legs(v)
    _check_base_holes(v)
    body = f"difference() {{\n  union() {{\n  {L_SHAPE.replace(NEWLINE, NEWLINE + '  ')}}}\n{BASE_HOLES}}}\n"
    text = (f"{_text(v)} The base leg has two through holes of diameter {num(v['hole_diameter'])} mm, centred at "
            f"x = {num(v['hole_x'])} mm and at y = width / 4 and y = 3 * width / 4.")
    return Part("L-bracket", v, body, text, PLACEMENT, 2, box(v["base_length"], v["width"], v["height"]), drilled,
                EDITS)  # fmt: skip


def gusseted(v: Dimensions) -> Part:
    _check_legs(v)
    _check_base_holes(v)
    d, t, g = v["hole_diameter"], v["thickness"], v["gusset_thickness"]
    require(v["gusset_size"] >= 4 and t + v["gusset_size"] <= min(v["base_length"], v["height"]) - 1,
            "the gusset does not fit the legs")  # fmt: skip
    require(v["width"] / 4 + d / 2 + MARGIN_MM <= (v["width"] - g) / 2, "the gusset meets the holes")
    require(v["upright_hole_z"] - d / 2 >= t + MARGIN_MM, "an upright hole cuts into the base")
    require(v["upright_hole_z"] + d / 2 + MARGIN_MM <= v["height"], "an upright hole leaves the upright")
    body = ("difference() {\n  union() {\n"
            "    cube([base_length, width, thickness]);\n"
            "    cube([thickness, width, height]);\n"
            "    translate([thickness, (width + gusset_thickness) / 2, thickness]) rotate([90, 0, 0])\n"
            "      linear_extrude(height = gusset_thickness)\n"
            "        polygon([[0, 0], [gusset_size, 0], [0, gusset_size]]);\n"
            f"  }}\n{BASE_HOLES}"
            "  for (y = [width / 4, 3 * width / 4])\n"
            "    translate([-1, y, upright_hole_z]) rotate([0, 90, 0])\n"
            "      cylinder(h = thickness + 2, d = hole_diameter);\n}\n")  # fmt: skip
    text = (f"{_text(v)} The base leg has two through holes of diameter {num(d)} mm centred at x = "
            f"{num(v['hole_x'])} mm, y = width / 4 and y = 3 * width / 4; the upright has two through holes of the "
            f"same diameter along x, centred at z = {num(v['upright_hole_z'])} mm and the same two y positions. A "
            f"triangular gusset {num(g)} mm thick, centred in y, fills the inner corner: its legs run "
            f"{num(v['gusset_size'])} mm along the top of the base and {num(v['gusset_size'])} mm up the inside of "
            "the upright.")  # fmt: skip
    return Part("gusseted L-bracket", v, body, text, PLACEMENT, 4, box(v["base_length"], v["width"], v["height"]),
                gusseted, EDITS)  # fmt: skip


def _legs(rng: random.Random) -> Dimensions:
    return {"base_length": half_steps(rng, 25, 70), "width": half_steps(rng, 20, 60), "height": half_steps(rng, 25, 70),
            "thickness": half_steps(rng, 3, 8)}  # fmt: skip


def _holes(rng: random.Random, legs: Dimensions) -> Dimensions:
    d = half_steps(rng, 3, 7)
    low = legs["thickness"] + d / 2 + MARGIN_MM
    return {"hole_diameter": d, "hole_x": half_steps(rng, low, max(low, legs["base_length"] - d / 2 - MARGIN_MM))}


def _hard(rng: random.Random) -> Part:
    legs = _legs(rng)
    holes = _holes(rng, legs)
    gusset = {"gusset_size": half_steps(rng, 6, 20), "gusset_thickness": half_steps(rng, 2, 5)}
    low = legs["thickness"] + holes["hole_diameter"] / 2 + MARGIN_MM
    upright = {"upright_hole_z": half_steps(rng, low, max(low, legs["height"] - holes["hole_diameter"]))}
    return gusseted({**legs, **holes, **gusset, **upright})


def _medium(rng: random.Random) -> Part:
    legs = _legs(rng)
    return drilled({**legs, **_holes(rng, legs)})


def draw(level: str, rng: random.Random) -> Part:
    """A bracket of `level`."""
    return first_valid(rng, {"easy": lambda r: plain(_legs(r)), "medium": _medium, "hard": _hard}[level])
