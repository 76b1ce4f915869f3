"""The 2D physics world of the gamedev domains: a body under gravity at a fixed time step, a bouncy
ground, static axis-aligned boxes (`physics_update`), and projectile launches (`launch_hits`).

Plain data, y pointing up. Body: `{"x", "y", "vx", "vy"}`, plus `"w"`, `"h"` (width, height; (x, y) is
the bottom-left corner) in worlds with boxes. World: `{"dt", "gravity"}` (gravity < 0), plus
`"restitution"` when there is a ground at y = 0, plus `"boxes": [[x, y, w, h], ...]` of static boxes.

One step, `physics_update(body, world)` (semi-implicit Euler: velocity first, then position with it):
1. `vy += gravity * dt`.
2. `x += vx * dt`; then for each box in order that the body overlaps: moving right it stops at the box's
   left side (`x = box_x - w`), moving left at its right side (`x = box_x + box_w`); `vx = 0`.
3. `y += vy * dt`; the same per box along y (`y = box_y - h` moving up, `y = box_y + box_h` moving
   down); `vy = 0`.
4. With a ground: if `y < 0`, then `y = 0` and `vy = -vy * restitution`.
Overlap is strict: boxes that only touch do not overlap. Other keys of the body pass through unchanged.

A launch: a point leaves (0, 0) with velocity (vx, vy) and moves by steps 1 and 2 (no ground, no boxes)
for `world["steps"]` steps; it hits when its position after some step is within `world["radius"]` of
the target. A world may fix `"vx"`, `"vy"` or the launch `"speed"`: a launch must respect them.

Also here: the play-throughs of the physics domains (`motion_cases`/`motion_judge`,
`launch_cases`/`launch_judge`). Guarantees: deterministic; inputs never changed; imports nothing at run
time but its sibling `script` (embedded in the trusted harness like `grid`). Not here: prompts.
"""

from __future__ import annotations

from posttrain.verify.gamedev.script import Rng, case_seed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

REL_TOL = 1e-6
"""Relative (and, near zero, absolute) tolerance of a candidate's numbers against the reference's."""
BODY_KEYS = ("x", "y", "vx", "vy")


def physics_update(body: dict[str, Any], world: dict[str, Any]) -> dict[str, Any]:
    """The body after one step of `world["dt"]` seconds."""
    dt, boxes = world["dt"], world.get("boxes", [])
    w, h = body.get("w", 0.0), body.get("h", 0.0)
    vx, vy = body["vx"], body["vy"] + world["gravity"] * dt
    x = body["x"] + vx * dt
    for bx, by, bw, bh in boxes:
        if _overlaps(x, body["y"], w, h, bx, by, bw, bh) and vx != 0:
            x, vx = (bx - w if vx > 0 else bx + bw), 0.0
    y = body["y"] + vy * dt
    for bx, by, bw, bh in boxes:
        if _overlaps(x, y, w, h, bx, by, bw, bh) and vy != 0:
            y, vy = (by - h if vy > 0 else by + bh), 0.0
    if "restitution" in world and y < 0:
        y, vy = 0.0, -vy * world["restitution"]
    return {**body, "x": x, "y": y, "vx": vx, "vy": vy}


def _overlaps(x: float, y: float, w: float, h: float, bx: float, by: float, bw: float, bh: float) -> bool:
    return x < bx + bw and bx < x + w and y < by + bh and by < y + h


def launch_hits(vx: float, vy: float, target: dict[str, Any], world: dict[str, Any]) -> bool:
    """Whether a launch from (0, 0) at (vx, vy) passes within `world["radius"]` of the target."""
    x = y = 0.0
    dt, gravity, reach = world["dt"], world["gravity"], world["radius"] ** 2
    for _ in range(world["steps"]):
        vy += gravity * dt
        x += vx * dt
        y += vy * dt
        if (x - target["x"]) ** 2 + (y - target["y"]) ** 2 <= reach:
            return True
    return False


def launch_allowed(velocity: dict[str, Any], world: dict[str, Any]) -> bool:
    """Whether a launch `{"vx", "vy"}` has the velocity, or the speed, the world fixes."""
    fixed_ok = all(_close(velocity[axis], world[axis]) for axis in ("vx", "vy") if axis in world)
    speed = (velocity["vx"] ** 2 + velocity["vy"] ** 2) ** 0.5
    return fixed_ok and ("speed" not in world or _close(speed, world["speed"]))


def reachable_target(target: dict[str, Any], world: dict[str, Any]) -> bool:
    """Whether the continuous-time ballistic equations have a launch for this target (with a margin):
    always for a fixed vx or vy; for a fixed speed s, when s^4 - g (g x^2 + 2 y s^2) > 0.1 s^4."""
    if "speed" not in world:
        return True
    s, g = world["speed"], -world["gravity"]
    return bool(s**4 - g * (g * target["x"] ** 2 + 2 * target["y"] * s**2) > 0.1 * s**4)


# ---------------------------------------------------------------- play-throughs
def motion_cases(spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The task's fixed motion play-throughs, then `spec["random"]["count"]` drawn from `seed`."""
    fixed = [{**case, "name": f"fixed-{i + 1}"} for i, case in enumerate(spec["fixed"])]
    drawn = [random_motion(spec, Rng(case_seed(seed, i)), f"random-{i + 1}") for i in range(spec["random"]["count"])]
    return fixed + drawn


def random_motion(spec: dict[str, Any], rng: Rng, name: str) -> dict[str, Any]:
    """A random world of the spec's features (`ground`, `boxes`) and a body in it, for `steps` steps."""
    features = spec["features"]
    world: dict[str, Any] = {"dt": (0.02, 0.05, 0.1)[rng.below(3)], "gravity": -rng.uniform(5.0, 15.0)}
    body: dict[str, Any] = {"x": rng.uniform(-3.0, 3.0), "y": rng.uniform(0.5, 8.0),
                            "vx": rng.uniform(-6.0, 6.0), "vy": rng.uniform(-4.0, 8.0)}  # fmt: skip
    if "ground" in features:
        world["restitution"] = rng.uniform(0.2, 0.9)
    if "boxes" in features:
        body["w"], body["h"] = rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5)
        world["boxes"] = _boxes_around(rng, body)
    return {"name": name, "body": body, "world": world, "steps": spec["random"]["steps"]}


def _boxes_around(rng: Rng, body: dict[str, Any]) -> list[list[float]]:
    """A wall on the side the body moves to and, two times in three, a platform under it (its top above
    the ground), both clear of it."""
    below = rng.uniform(0.0, body["y"] - 0.2)
    gap = rng.uniform(0.5, 3.0)
    wall_x = body["x"] + body["w"] + gap if body["vx"] >= 0 else body["x"] - gap - 1.0
    wall = [wall_x, below, 1.0, rng.uniform(4.0, 9.0)]
    if rng.below(3) == 0:
        return [wall]
    return [[body["x"] - rng.uniform(3.0, 6.0), below - 1.0, rng.uniform(7.0, 12.0), 1.0], wall]


def motion_events(case: dict[str, Any]) -> set[str]:
    """What happens in a motion play-through: `box_x`, `box_y` (a box stopped the body along that axis),
    `bounce` (the ground threw it back up)."""
    body, world, events = case["body"], case["world"], set()
    for _ in range(case["steps"]):
        after = physics_update(body, world)
        falling = body["vy"] + world["gravity"] * world["dt"]
        events |= {name for name, happened in (("box_x", after["vx"] == 0 != body["vx"]),
                                                ("box_y", after["vy"] == 0 != falling),
                                                ("bounce", after["y"] == 0 and after["vy"] > 0)) if happened}
        body = after
    return events


def motion_judge(candidate: Callable[..., Any], case: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether `candidate(body, world)` returns the reference body (within `REL_TOL`) at every step, each
    step starting from the reference's previous body."""
    body, world = case["body"], case["world"]
    for _ in range(case["steps"]):
        expected = physics_update(body, world)
        if not _close_body(candidate(dict(body), _copy_world(world)), expected):
            return False
        body = expected
    return True


def _copy_world(world: dict[str, Any]) -> dict[str, Any]:
    return {**world, "boxes": [list(box) for box in world["boxes"]]} if "boxes" in world else dict(world)


def _close_body(got: Any, expected: dict[str, Any]) -> bool:
    return (type(got) is dict and got.keys() == expected.keys()
            and all(_close(got[key], value) for key, value in expected.items()))  # fmt: skip


def _close(got: Any, expected: float) -> bool:
    if type(got) not in (int, float) or not abs(got) < float("inf"):
        return False
    return abs(got - expected) <= REL_TOL * max(1.0, abs(expected))


def launch_cases(spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The task's fixed targets, then `spec["random"]["count"]` drawn from `seed`."""
    fixed = [{**case, "name": f"fixed-{i + 1}"} for i, case in enumerate(spec["fixed"])]
    drawn = [random_launch(spec, Rng(case_seed(seed, i)), f"random-{i + 1}") for i in range(spec["random"]["count"])]
    return fixed + drawn


def random_launch(spec: dict[str, Any], rng: Rng, name: str) -> dict[str, Any]:
    """A target in the spec's ranges that a launch allowed by its world can reach."""
    (x_low, x_high), (y_low, y_high) = spec["random"]["x"], spec["random"]["y"]
    target = {"x": 1.0, "y": 0.0}
    for _ in range(100):
        target = {"x": round(rng.uniform(x_low, x_high), 2), "y": round(rng.uniform(y_low, y_high), 2)}
        if reachable_target(target, spec["world"]):
            break
    return {"name": name, "target": target}


def launch_judge(candidate: Callable[..., Any], case: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether `candidate(target)` returns `{"vx", "vy"}` (numbers) that the world allows and that hit."""
    velocity = candidate(dict(case["target"]))
    if type(velocity) is not dict or set(velocity) != {"vx", "vy"}:
        return False
    if not all(type(v) in (int, float) and abs(v) < 1e6 for v in velocity.values()):
        return False
    world = spec["world"]
    return launch_allowed(velocity, world) and launch_hits(velocity["vx"], velocity["vy"], case["target"], world)
