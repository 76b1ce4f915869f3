"""`gamedev/physics/<task>@<level>`: game physics code, graded by simulation (verifier `gamedev_play`).

- `motion`: implement one fixed step, `update(body, world) -> body` (`physics_update` of
  `posttrain.verify.gamedev.physics`): easy is semi-implicit Euler under gravity; medium adds a ground
  that bounces (`restitution`); hard adds static axis-aligned boxes the body stops against (the body gets
  a width and a height). Play-throughs: `FIXED_MOTION` of the task's own worlds and `RANDOM_COUNT` random
  ones per grading (new gravity, time step, bodies and boxes), every step compared within 1e-6.
- `launch`: aim a projectile, `launch(target) -> {"vx", "vy"}`: easy fixes vy and puts targets on the
  ground, medium fixes vx, hard fixes the launch speed (the angle is the unknown). A launch passes when the
  engine's simulation (time step 0.01 s) passes within 0.5 of the target; the closed-form ballistic answer
  does. Targets: the task's `FIXED_TARGETS` and `RANDOM_COUNT` random ones per grading.
The answer is a reference function written here from the rules the prompt states. Guarantees:
deterministic in the RNG; every number in a prompt is the engine's. Not here: the engine, grading.
"""

from __future__ import annotations

import json
from typing import Any

from posttrain.tasks.families.code.gold import fenced
from posttrain.verify.gamedev.physics import motion_events, physics_update, random_launch, random_motion
from posttrain.verify.gamedev.script import Rng

FIXED_MOTION = 2
FIXED_TARGETS = 2
RANDOM_COUNT = 4
MOTION_STEPS = 24
MOTION_FEATURES = {"easy": [], "medium": ["ground"], "hard": ["ground", "boxes"]}
LAUNCH = {"dt": 0.01, "radius": 0.5, "steps": 600}
"""Every launch world: time step, hit radius, steps simulated (6 s)."""
TARGETS = {"easy": {"x": [2.0, 20.0], "y": [0.0, 0.0]}, "medium": {"x": [3.0, 15.0], "y": [-2.0, 6.0]},
           "hard": {"x": [3.0, 15.0], "y": [-2.0, 5.0]}}  # fmt: skip
"""Level -> the ranges targets are drawn from."""


def motion_task(level: str, rng: Rng) -> tuple[str, dict[str, Any], str]:
    """(prompt, gold, answer) of one `motion` task."""
    features = MOTION_FEATURES[level]
    spec = {"features": features, "random": {"count": 0, "steps": MOTION_STEPS}}
    fixed = _covering(spec, rng)
    gold = {"game": "motion", "entry_point": "update", "features": features,
            "fixed": [{"body": c["body"], "world": c["world"], "steps": c["steps"]} for c in fixed],
            "random": {"count": RANDOM_COUNT, "steps": MOTION_STEPS}}  # fmt: skip
    return motion_prompt(features, fixed[0]), gold, fenced(MOTION_GOLD[level])


def _covering(spec: dict[str, Any], rng: Rng, draws: int = 30) -> list[dict[str, Any]]:
    """`FIXED_MOTION` play-throughs that together make the level's rules happen (a bounce, a box stopping
    the body along x and along y), by greedy set cover over `draws` random ones."""
    needed = {"ground": {"bounce"}, "boxes": {"box_x", "box_y"}}
    missing = set().union(*(needed[f] for f in spec["features"]))
    pool = [(case, motion_events(case)) for case in (_rounded(random_motion(spec, rng, "fixed")) for _ in range(draws))]
    chosen: list[dict[str, Any]] = []
    for _ in range(FIXED_MOTION):
        case, events = max(pool, key=lambda drawn: len(drawn[1] & missing))
        chosen.append(case)
        pool.remove((case, events))
        missing -= events
    return chosen


def _rounded(case: dict[str, Any]) -> dict[str, Any]:
    """The case with every number to two decimals (short prompts; still a valid, clear world)."""
    world = {k: (round(v, 2) if k != "boxes" else [[round(n, 2) for n in box] for box in v]) for k, v in case["world"].items()}
    return {**case, "body": {k: round(v, 2) for k, v in case["body"].items()}, "world": world}


def motion_prompt(features: list[str], example: dict[str, Any]) -> str:
    body, world = example["body"], example["world"]
    keys = '{"x", "y", "vx", "vy", "w", "h"}' if "boxes" in features else '{"x", "y", "vx", "vy"}'
    world_keys = '"dt", "gravity" (< 0)' + (', "restitution"' if "ground" in features else "")
    world_keys += ', "boxes": [[x, y, w, h], ...]' if "boxes" in features else ""
    lines = ["Implement one physics step of a game: `def update(body: dict, world: dict) -> dict`.",
             f"body = {keys} (floats, y points up{'; (x, y) is its bottom-left corner' if 'boxes' in features else ''}); "
             f"world = {{{world_keys}}}.",
             "Semi-implicit Euler: first vy += gravity * dt; then x += vx * dt; then y += vy * dt."]  # fmt: skip
    if "boxes" in features:
        lines += ["Boxes are solid: after moving x, for each box the body overlaps (strictly), put it against the "
                  "box's side it came from (x = bx - w when vx > 0, else x = bx + bw) and set vx = 0; after moving y, "
                  "the same along y (y = by - h when vy > 0, else y = by + bh; vy = 0)."]  # fmt: skip
    if "ground" in features:
        lines += ["Last, the ground bounces: if y < 0, then y = 0 and vy = -vy * restitution."]
    lines += ["Return a new dict with the same keys.",
              f"Example: update({json.dumps(body)}, {json.dumps(world)})\nreturns "
              f"{json.dumps({k: round(v, 6) for k, v in physics_update(body, world).items()})}",
              "Reply with the function in a ```python block."]  # fmt: skip
    return "\n".join(lines)


_EULER = ('    vx = body["vx"]\n    vy = body["vy"] + world["gravity"] * world["dt"]\n    x = body["x"] + vx * world["dt"]\n')
_BOXES_X = ("    for bx, by, bw, bh in world[\"boxes\"]:\n"
            "        if x < bx + bw and bx < x + w and y < by + bh and by < y + h and vx != 0:\n"
            "            x = bx - w if vx > 0 else bx + bw\n            vx = 0.0\n")  # fmt: skip
_BOXES_Y = ("    for bx, by, bw, bh in world[\"boxes\"]:\n"
            "        if x < bx + bw and bx < x + w and y < by + bh and by < y + h and vy != 0:\n"
            "            y = by - h if vy > 0 else by + bh\n            vy = 0.0\n")  # fmt: skip
_GROUND = '    if y < 0:\n        y = 0.0\n        vy = -vy * world["restitution"]\n'
MOTION_GOLD = {
    "easy": f"def update(body, world):\n{_EULER}    y = body[\"y\"] + vy * world[\"dt\"]\n"
            '    return {"x": x, "y": y, "vx": vx, "vy": vy}\n',
    "medium": f"def update(body, world):\n{_EULER}    y = body[\"y\"] + vy * world[\"dt\"]\n{_GROUND}"
              '    return {"x": x, "y": y, "vx": vx, "vy": vy}\n',
    "hard": f"def update(body, world):\n    w, h, y = body[\"w\"], body[\"h\"], body[\"y\"]\n{_EULER}{_BOXES_X}"
            f"    y = body[\"y\"] + vy * world[\"dt\"]\n{_BOXES_Y}{_GROUND}"
            '    return {"x": x, "y": y, "vx": vx, "vy": vy, "w": w, "h": h}\n',
}
"""Level -> a reference `update`."""


def launch_task(level: str, rng: Rng) -> tuple[str, dict[str, Any], str]:
    """(prompt, gold, answer) of one `launch` task."""
    world: dict[str, Any] = {**LAUNCH, "gravity": -round(rng.uniform(8.0, 12.0), 1)}
    fixed_axis = {"easy": "vy", "medium": "vx", "hard": "speed"}[level]
    world[fixed_axis] = float(rng.between(*{"vy": (6, 14), "vx": (4, 8), "speed": (14, 18)}[fixed_axis]))
    spec = {"world": world, "random": {"count": 0, **TARGETS[level]}}
    fixed = [random_launch(spec, rng, "fixed")["target"] for _ in range(FIXED_TARGETS)]
    gold = {"game": "launch", "entry_point": "launch", "world": world, "fixed": [{"target": t} for t in fixed],
            "random": {"count": RANDOM_COUNT, **TARGETS[level]}}  # fmt: skip
    return launch_prompt(level, world, fixed[0]), gold, fenced(LAUNCH_GOLD[level].format(lift=-world["gravity"], **world))


def launch_prompt(level: str, world: dict[str, Any], target: dict[str, Any]) -> str:
    given = {"easy": f"vy must be {world.get('vy')}; the target is on the ground (y = 0)",
             "medium": f"vx must be {world.get('vx')}",
             "hard": f"the launch speed sqrt(vx**2 + vy**2) must be {world.get('speed')} (choose the angle)"}[level]
    return "\n".join([
        "Aim a projectile in a game: `def launch(target: dict) -> dict` returns {\"vx\": float, \"vy\": float}.",
        f"The ball starts at (0, 0) with velocity (vx, vy); gravity is {world['gravity']} (y points up); there is "
        "no ground and no drag. It must pass within 0.5 of target = {\"x\": float, \"y\": float}.",
        f"Constraint: {given}.",
        "The game simulates it in steps of 0.01 s (semi-implicit Euler) for 6 s; the exact ballistic "
        "formulas are accurate enough.",
        f"Example target: {json.dumps(target)}",
        "Reply with the function in a ```python block.",
    ])  # fmt: skip


LAUNCH_GOLD = {
    "easy": "def launch(target):\n    vy = {vy}\n    flight = 2 * vy / -({gravity})\n"
            '    return {{"vx": target["x"] / flight, "vy": vy}}\n',
    "medium": "def launch(target):\n    vx = {vx}\n    t = target[\"x\"] / vx\n"
              '    return {{"vx": vx, "vy": target["y"] / t - ({gravity}) * t / 2}}\n',
    "hard": "import math\n\n\ndef launch(target):\n    s, g = {speed}, {lift}\n"
            '    x, y = target["x"], target["y"]\n'
            "    root = math.sqrt(s**4 - g * (g * x * x + 2 * y * s * s))\n"
            "    angle = math.atan2(s * s - root, g * x)\n"
            '    return {{"vx": s * math.cos(angle), "vy": s * math.sin(angle)}}\n',
}
"""Level -> a reference `launch`, formatted with the task's world."""
