"""Plates with hole patterns (`3d/openscad/plate@<level>`).

easy: a plate with one centred hole or two holes on its centre line. medium: four corner holes at an
inset from both edges. hard: a grid of holes centred on the plate, or a square flange with a central bore
and a bolt circle. Holes go right through (each adds one to the genus); every hole keeps at least
1.5 mm of material to an edge and to its neighbours.
"""

from __future__ import annotations

import math
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

CORNER = "the plate's bottom face on z = 0, one corner at the origin, the plate extending along +x and +y"
CENTRED = "centred on the origin in x and y, the bottom face on z = 0"
MARGIN_MM = 1.5
HOLE = "cylinder(h = thickness + 2, d = hole_diameter)"
EDITS = (Editable("thickness", "the plate's thickness"), Editable("length", "the plate's length (x)"),
         Editable("width", "the plate's width (y)"))  # fmt: skip


def _plate_text(v: Dimensions) -> str:
    return f"A flat plate {num(v['length'])} mm long (x), {num(v['width'])} mm wide (y) and {num(v['thickness'])} mm thick"


def center_hole(v: Dimensions) -> Part:
    require(v["hole_diameter"] + 2 * MARGIN_MM <= min(v["length"], v["width"]), "the hole does not fit")
    body = (f"difference() {{\n  cube([length, width, thickness]);\n"
            f"  translate([length / 2, width / 2, -1]) {HOLE};\n}}\n")  # fmt: skip
    return Part("plate", v, body, f"{_plate_text(v)}, with one through hole of diameter {num(v['hole_diameter'])} "
                "mm at its centre.", CORNER, 1, box(v["length"], v["width"], v["thickness"]), center_hole, EDITS)  # fmt: skip


def end_holes(v: Dimensions) -> Part:
    d, edge = v["hole_diameter"], v["edge_distance"]
    require(edge - d / 2 >= MARGIN_MM and v["length"] - 2 * edge >= d + MARGIN_MM, "the holes do not fit")
    require(d + 2 * MARGIN_MM <= v["width"], "the holes do not fit the width")
    body = ("difference() {\n  cube([length, width, thickness]);\n"
            "  for (x = [edge_distance, length - edge_distance])\n"
            f"    translate([x, width / 2, -1]) {HOLE};\n}}\n")  # fmt: skip
    text = (f"{_plate_text(v)}, with two through holes of diameter {num(d)} mm on the line y = width / 2, their "
            f"centres {num(edge)} mm from the two short edges (x = {num(edge)} and x = {num(v['length'] - edge)}).")
    return Part("plate", v, body, text, CORNER, 2, box(v["length"], v["width"], v["thickness"]), end_holes, EDITS)


def corner_holes(v: Dimensions) -> Part:
    d, inset = v["hole_diameter"], v["inset"]
    require(inset - d / 2 >= MARGIN_MM, "the holes are too close to the edges")
    require(min(v["length"], v["width"]) - 2 * inset >= d + MARGIN_MM, "the holes overlap")
    body = ("difference() {\n  cube([length, width, thickness]);\n"
            "  for (x = [inset, length - inset], y = [inset, width - inset])\n"
            f"    translate([x, y, -1]) {HOLE};\n}}\n")  # fmt: skip
    text = (f"{_plate_text(v)}, with four through holes of diameter {num(d)} mm, one near each corner, each "
            f"centred {num(inset)} mm from both adjacent edges.")
    return Part("plate", v, body, text, CORNER, 4, box(v["length"], v["width"], v["thickness"]), corner_holes, EDITS)


def hole_grid(v: Dimensions) -> Part:
    d, cols, rows, px, py = v["hole_diameter"], int(v["columns"]), int(v["rows"]), v["pitch_x"], v["pitch_y"]
    require(px - d >= MARGIN_MM and py - d >= MARGIN_MM, "neighbouring holes overlap")
    require(v["length"] - (cols - 1) * px - d >= 4 * MARGIN_MM, "the grid is too long for the plate")
    require(v["width"] - (rows - 1) * py - d >= 4 * MARGIN_MM, "the grid is too wide for the plate")
    body = ("difference() {\n  cube([length, width, thickness]);\n"
            "  for (i = [0 : columns - 1], j = [0 : rows - 1])\n"
            "    translate([(length - (columns - 1) * pitch_x) / 2 + i * pitch_x,\n"
            "               (width - (rows - 1) * pitch_y) / 2 + j * pitch_y, -1])\n"
            f"      {HOLE};\n}}\n")  # fmt: skip
    text = (f"{_plate_text(v)}, with a grid of {cols} x {rows} through holes (columns along x, rows along y) of "
            f"diameter {num(d)} mm, spaced {num(px)} mm apart along x and {num(py)} mm along y, the grid centred "
            "on the plate.")
    return Part("perforated plate", v, body, text, CORNER, cols * rows, box(v["length"], v["width"], v["thickness"]),
                hole_grid, EDITS)  # fmt: skip


def flange(v: Dimensions) -> Part:
    side, bore, circle, d, count = v["side"], v["bore"], v["bolt_circle"], v["hole_diameter"], int(v["hole_count"])
    require(bore / 2 + MARGIN_MM <= circle / 2 - d / 2, "the bolt holes cut into the bore")
    require(circle / 2 + d / 2 + MARGIN_MM <= side / 2, "the bolt holes leave the plate")
    require(circle * math.sin(math.pi / count) >= d + MARGIN_MM, "neighbouring bolt holes overlap")
    body = ("difference() {\n  translate([-side / 2, -side / 2, 0]) cube([side, side, thickness]);\n"
            "  translate([0, 0, -1]) cylinder(h = thickness + 2, d = bore);\n"
            "  for (k = [0 : hole_count - 1])\n"
            "    rotate([0, 0, k * 360 / hole_count]) translate([bolt_circle / 2, 0, -1])\n"
            f"      {HOLE};\n}}\n")  # fmt: skip
    text = (f"A square flange plate {num(side)} x {num(side)} mm and {num(v['thickness'])} mm thick, with a central "
            f"through bore of diameter {num(bore)} mm and {count} through holes of diameter {num(d)} mm evenly "
            f"spaced on a bolt circle of diameter {num(circle)} mm, the first hole on the +x axis.")
    edits = (Editable("thickness", "the flange's thickness"), Editable("side", "the flange's side length"))
    return Part("flange", v, body, text, CENTRED, count + 1, box(side, side, v["thickness"], -side / 2, -side / 2),
                flange, edits)  # fmt: skip


def _plate_dims(rng: random.Random) -> Dimensions:
    return {"length": half_steps(rng, 30, 100), "width": half_steps(rng, 20, 70), "thickness": half_steps(rng, 2, 8)}


def _easy(rng: random.Random) -> Part:
    hole = half_steps(rng, 3, 10)
    if rng.random() < 0.5:
        return center_hole({**_plate_dims(rng), "hole_diameter": hole})
    return end_holes({**_plate_dims(rng), "hole_diameter": hole, "edge_distance": half_steps(rng, 4, 15)})


def _medium(rng: random.Random) -> Part:
    return corner_holes({**_plate_dims(rng), "hole_diameter": half_steps(rng, 3, 8), "inset": half_steps(rng, 4, 12)})


def _hard(rng: random.Random) -> Part:
    if rng.random() < 0.5:
        return hole_grid({**_plate_dims(rng), "hole_diameter": half_steps(rng, 2, 6), "columns": rng.randint(2, 5),
                          "rows": rng.randint(2, 4), "pitch_x": half_steps(rng, 6, 20),
                          "pitch_y": half_steps(rng, 6, 16)})  # fmt: skip
    return flange({"side": half_steps(rng, 40, 100), "thickness": half_steps(rng, 3, 10), "bore": half_steps(rng, 8, 30),
                   "bolt_circle": half_steps(rng, 25, 80), "hole_diameter": half_steps(rng, 3, 8),
                   "hole_count": float(rng.choice((3, 4, 5, 6, 8)))})  # fmt: skip


def draw(level: str, rng: random.Random) -> Part:
    """A plate of `level`."""
    return first_valid(rng, {"easy": _easy, "medium": _medium, "hard": _hard}[level])
