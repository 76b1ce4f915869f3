"""Open-top enclosures from a parametric spec (`3d/openscad/enclosure@<level>`).

A box `length` x `width` x `height` with walls and floor `wall` thick and no lid. easy: the bare box.
medium: a rectangular port through the front wall (y = 0), centred in x. hard: the port plus a square
post in each inner corner, standing on the floor, with a blind screw hole from its top.
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

PLACEMENT = "one outer corner at the origin, the box extending along +x, +y and +z, the open side facing +z"
MARGIN_MM = 1.5
SHELL = ("  cube([length, width, height]);\n"
         "  translate([wall, wall, wall]) cube([length - 2 * wall, width - 2 * wall, height]);\n")  # fmt: skip
PORT = "  translate([(length - port_width) / 2, -1, port_z]) cube([port_width, wall + 2, port_height]);\n"
EDITS = (Editable("height", "the box's outer height"), Editable("length", "the box's outer length (x)"),
         Editable("wall", "the wall and floor thickness"))  # fmt: skip


def _text(v: Dimensions) -> str:
    return (f"An open-top box (no lid) with outer size {num(v['length'])} mm (x) by {num(v['width'])} mm (y) by "
            f"{num(v['height'])} mm (z); its four walls and its floor are {num(v['wall'])} mm thick.")  # fmt: skip


def _check_shell(v: Dimensions) -> None:
    require(v["wall"] > 0 and min(v["length"], v["width"]) >= 4 * v["wall"] + 4, "the walls leave no room")
    require(v["height"] >= 2 * v["wall"] + 4, "the box is too shallow")


def _check_port(v: Dimensions) -> None:
    require(v["port_width"] + 2 * MARGIN_MM <= v["length"] - 2 * v["wall"], "the port is wider than the front wall")
    require(v["port_z"] >= v["wall"] + MARGIN_MM, "the port cuts into the floor")
    require(v["port_z"] + v["port_height"] + MARGIN_MM <= v["height"], "the port cuts the rim")


def tray(v: Dimensions) -> Part:
    _check_shell(v)
    return Part("open-top box", v, f"difference() {{\n{SHELL}}}\n", _text(v), PLACEMENT, 0,
                box(v["length"], v["width"], v["height"]), tray, EDITS)  # fmt: skip


def _port_text(v: Dimensions) -> str:
    return (f" The front wall (the one on y = 0) has a rectangular port {num(v['port_width'])} mm wide and "
            f"{num(v['port_height'])} mm high cut right through it, centred in x, its lower edge at z = "
            f"{num(v['port_z'])} mm.")  # fmt: skip


def ported(v: Dimensions) -> Part:
    _check_shell(v)
    _check_port(v)
    return Part("open-top box", v, f"difference() {{\n{SHELL}{PORT}}}\n", _text(v) + _port_text(v), PLACEMENT, 1,
                box(v["length"], v["width"], v["height"]), ported, EDITS)  # fmt: skip


def posted(v: Dimensions) -> Part:
    _check_shell(v)
    _check_port(v)
    post, screw, depth, wall = v["post"], v["screw_diameter"], v["screw_depth"], v["wall"]
    require(screw + 2 * MARGIN_MM <= post and depth + MARGIN_MM <= v["post_height"], "the screw hole does not fit")
    require(v["post_height"] + wall <= v["height"], "the posts stand above the rim")
    require(v["port_width"] + 2 * MARGIN_MM <= v["length"] - 2 * wall - 2 * post, "the port meets a post")
    require(2 * post + 4 <= min(v["length"], v["width"]) - 2 * wall, "the posts fill the box")
    body = ("difference() {\n  union() {\n    difference() {\n"
            "      cube([length, width, height]);\n"
            "      translate([wall, wall, wall]) cube([length - 2 * wall, width - 2 * wall, height]);\n"
            "    }\n"
            "    for (x = [wall, length - wall - post], y = [wall, width - wall - post])\n"
            "      translate([x, y, 0]) cube([post, post, wall + post_height]);\n"
            f"  }}\n{PORT}"
            "  for (x = [wall + post / 2, length - wall - post / 2], y = [wall + post / 2, width - wall - post / 2])\n"
            "    translate([x, y, wall + post_height - screw_depth]) cylinder(h = screw_depth + 1, d = screw_diameter);\n"
            "}\n")  # fmt: skip
    text = (_text(v) + _port_text(v) + f" In each inner corner stands a square post {num(post)} x {num(post)} mm, "
            f"touching both walls and rising {num(v['post_height'])} mm above the floor; each post has a blind hole "
            f"of diameter {num(screw)} mm and depth {num(depth)} mm, centred in its top face.")  # fmt: skip
    return Part("open-top box with screw posts", v, body, text, PLACEMENT, 1,
                box(v["length"], v["width"], v["height"]), posted, EDITS)  # fmt: skip


def _shell(rng: random.Random) -> Dimensions:
    return {"length": half_steps(rng, 40, 120), "width": half_steps(rng, 30, 90), "height": half_steps(rng, 15, 60),
            "wall": half_steps(rng, 1.5, 4)}  # fmt: skip


def _port(rng: random.Random, shell: Dimensions) -> Dimensions:
    port_height = half_steps(rng, 4, max(4.0, shell["height"] / 2))
    return {"port_width": half_steps(rng, 6, 30), "port_height": port_height,
            "port_z": half_steps(rng, shell["wall"] + MARGIN_MM, max(shell["wall"] + MARGIN_MM, shell["height"] / 3))}


def _medium(rng: random.Random) -> Part:
    shell = _shell(rng)
    return ported({**shell, **_port(rng, shell)})


def _hard(rng: random.Random) -> Part:
    shell = _shell(rng)
    post = half_steps(rng, 6, 12)
    posts = {"post": post, "post_height": half_steps(rng, 6, max(6.0, shell["height"] - shell["wall"])),
             "screw_diameter": half_steps(rng, 2, post - 3), "screw_depth": half_steps(rng, 3, 6)}  # fmt: skip
    return posted({**shell, **_port(rng, shell), **posts})


def draw(level: str, rng: random.Random) -> Part:
    """An enclosure of `level`."""
    return first_valid(rng, {"easy": lambda r: tray(_shell(r)), "medium": _medium, "hard": _hard}[level])
