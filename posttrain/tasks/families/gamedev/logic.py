"""`gamedev/logic/<mechanic>@<level>`: implement one turn of the grid game, `step(state, action) -> state`.

A mechanic's level is the set of tiles its grids hold (and so the rules its prompt states):

| mechanic | easy | medium | hard |
|---|---|---|---|
| `grid` | walls | + coins, goal | + keys, doors |
| `boxes` | boxes | + holes | + coins, keys, doors, goal |
| `enemies` | `<` `>` enemies, `wait` | + `^` `v`, coins | + goal, boxes |

The rules are `posttrain.verify.gamedev.grid`'s, stated in the prompt with one worked example. Gold
(verifier `gamedev_play`, game `grid`): up to `MAX_FIXED` fixed play-throughs chosen so that together they
make every event the rules name happen (a coin taken, a door locked, a box stuck, an enemy turning, the
game lost, a step after the game is over, ...), plus `RANDOM_COUNT` random ones drawn per grading. The
answer is a solution written here, independently of the engine, from per-tile fragments (the engine and
this solution must agree on every play-through, which the tests check). Guarantees: deterministic in
the RNG. Not here: the engine, grading.
"""

from __future__ import annotations

import json
from typing import Any

from posttrain.tasks.families.code.gold import fenced
from posttrain.verify.gamedev.grid import DIRECTIONS, case_events, grid_step, random_case, step_events
from posttrain.verify.gamedev.script import Rng

TILES: dict[str, dict[str, str]] = {
    "grid": {"easy": "", "medium": "$G", "hard": "$GkD"},
    "boxes": {"easy": "B", "medium": "BO", "hard": "BO$kDG"},
    "enemies": {"easy": "<>", "medium": "<>^v$", "hard": "<>^v$GB"},
}
"""Mechanic -> level -> the tiles its grids hold besides `#`, `.` and `@`."""
MAX_FIXED = 3
RANDOM_COUNT = 4
FIXED_SHAPE = {"width": [5, 7], "height": [5, 6], "steps": 16}
RANDOM_SHAPE = {"width": [5, 8], "height": [5, 7], "steps": 16}
_EVENTS = {"": {"move", "blocked"}, "$": {"coin"}, "k": {"key"}, "D": {"door", "locked"}, "G": {"won", "over"},
           "B": {"push", "stuck"}, "O": {"fill"}, "<": {"patrol", "turn", "caught", "wait"}}  # fmt: skip
"""Tile -> the events the fixed play-throughs must show when the grids hold it."""
_NAMES = {"$": "'$' coin", "k": "'k' key", "D": "'D' door", "G": "'G' goal", "B": "'B' box", "O": "'O' hole"}


def logic_task(mechanic: str, level: str, rng: Rng) -> tuple[str, dict[str, Any], str]:
    """(prompt, gold, answer) of one task."""
    tiles = TILES[mechanic][level]
    actions = [*DIRECTIONS, "wait"] if "<" in tiles else list(DIRECTIONS)
    spec: dict[str, Any] = {"tiles": tiles, "actions": actions, "random": {**FIXED_SHAPE, "count": 0}}
    fixed = covering_cases(spec, rng)
    gold = {"game": "grid", "entry_point": "step", "tiles": tiles, "actions": actions,
            "fixed": [{"start": c["start"], "actions": c["actions"]} for c in fixed],
            "random": {**RANDOM_SHAPE, "count": RANDOM_COUNT}}  # fmt: skip
    return prompt(tiles, actions, _example(fixed)), gold, fenced(gold_step(tiles))


def required_events(tiles: str) -> set[str]:
    needed = set(_EVENTS[""])
    for tile in tiles:
        needed |= _EVENTS.get(tile, set())
    return needed


def covering_cases(spec: dict[str, Any], rng: Rng, batch: int = 24, batches: int = 8) -> list[dict[str, Any]]:
    """At most `MAX_FIXED` random play-throughs that together show every required event: greedy set
    cover over batches of `batch` draws, a new batch while events are missing (after `batches`, the
    best found; the tests measure how often that happens)."""
    needed = required_events(spec["tiles"])
    best: list[tuple[dict[str, Any], set[str]]] = []
    pool: list[tuple[dict[str, Any], set[str]]] = []
    for _ in range(batches):
        pool += [(case, set(case_events(case)) & needed) for case in (random_case(spec, rng, "f") for _ in range(batch))]
        chosen, missing = [], set(needed)
        for _ in range(MAX_FIXED):
            case, shown = max(pool, key=lambda drawn: len(drawn[1] & missing))
            if not shown & missing:
                break
            chosen.append((case, shown))
            missing -= shown
        if not best or len(missing) < len(needed - set().union(*(shown for _, shown in best))):
            best = chosen
        if not missing:
            break
    return [case for case, _ in best] or [pool[0][0]]


def _example(cases: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The first step of the fixed play-throughs in which more than the player's walk happens, else the
    first in which the player walks."""
    steps = []
    for case in cases:
        state = case["start"]
        for action in case["actions"]:
            after, events = step_events(state, action)
            steps.append((len(set(events) - {"move", "blocked", "wait"}) * 2 + ("move" in events), state, action))
            state = after
    best = max(score for score, _, _ in steps)
    return next((state, action) for score, state, action in steps if score == best)


def prompt(tiles: str, actions: list[str], example: tuple[dict[str, Any], str]) -> str:
    state, action = example
    named = ", ".join(["'#' wall", "'.' floor", "'@' player"] + [_NAMES[t] for t in tiles if t in _NAMES])
    quoted = ", ".join(json.dumps(a) for a in actions)
    lines = ["Implement one turn of a grid game: `def step(state: dict, action: str) -> dict`.",
             'state = {"grid": [str, ...], "coins": int, "keys": int, "status": "playing"}; the grid\'s rows are '
             f"equal-length strings. Tiles: {named}.",
             f'action is one of {quoted} ("up" goes to the previous row). Rules:',
             "- The player moves one cell that way onto '.'; the cell it leaves becomes '.'. Walls block."]  # fmt: skip
    lines += [rule for trigger, rule in _RULES if any(t in tiles for t in trigger)]
    lines += ["Return a new dict with the same four keys.",
              f"Example: step({json.dumps(state)}, {json.dumps(action)})\nreturns {json.dumps(grid_step(state, action))}",
              "Reply with the function in a ```python block."]  # fmt: skip
    return "\n".join(lines)


_RULES = (
    ("$", "- Moving onto '$' collects it: coins + 1."),
    ("k", "- Moving onto 'k' picks it up: keys + 1."),
    ("D", "- Moving onto 'D' uses a key (keys - 1) and the door is gone; with no key the door blocks."),
    ("G", "- Moving onto 'G' sets status to \"won\"."),
    ("B", "- Moving into 'B' pushes the box one cell on if the cell behind it is '.'; otherwise nothing moves."),
    ("O", "- 'O' is a hole: it blocks the player; a box pushed into it fills it (both cells become '.')."),
    ("<", "- '<' and '>' are enemies walking left and right (a \"wait\" action moves no player)."),
    ("^", "- '^' and 'v' are enemies walking up and down."),
    ("<", "- After the player's move each enemy, in reading order of where they stood before any enemy moved, "
          "steps one cell its way onto '.'; onto '@' it sets status \"lost\" and no other enemy moves; "
          "anything else turns it round ('<' and '>' swap, '^' and 'v' swap) where it stands. "
          "Moving the player onto an enemy sets status \"lost\" and nothing moves."),
    ("G<", "- When status is not \"playing\", return the state unchanged."),
)
"""(tiles that bring the rule in, the rule's line), in the order the prompt states them."""


def gold_step(tiles: str) -> str:
    """A reference `step` for grids holding `tiles`, written from per-tile fragments."""
    over = any(t in tiles for t in "G<")
    head = ['def step(state, action):']
    if over:
        head += ['    if state["status"] != "playing":', "        return dict(state)"]
    head += ['    grid = [list(row) for row in state["grid"]]',
             '    coins, keys, status = state["coins"], state["keys"], state["status"]',
             '    y = next(i for i, row in enumerate(grid) if "@" in row)',
             '    x = grid[y].index("@")',
             '    dx, dy = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}.get(action, (0, 0))',
             '    tile = grid[y + dy][x + dx]',
             '    moved = tile == "."']  # fmt: skip
    branches = [body for tile, body in _GOLD_BRANCHES if tile in tiles]
    if "B" in tiles:
        branches.append(_gold_push("O" in tiles))
    body = [("    if " if i == 0 else "    elif ") + branch for i, branch in enumerate(branches)]
    body += ["    if moved:", '        grid[y][x] = "."', '        grid[y + dy][x + dx] = "@"']
    if "<" in tiles:
        body += _GOLD_ENEMIES
    body.append('    return {"grid": ["".join(row) for row in grid], "coins": coins, "keys": keys, "status": status}')
    return "\n".join(head + body) + "\n"


_GOLD_BRANCHES = (
    ("$", 'tile == "$":\n        coins += 1\n        moved = True'),
    ("k", 'tile == "k":\n        keys += 1\n        moved = True'),
    ("D", 'tile == "D" and keys > 0:\n        keys -= 1\n        moved = True'),
    ("G", 'tile == "G":\n        status = "won"\n        moved = True'),
    ("<", 'tile in "<>^v":\n        status = "lost"'),
)


def _gold_push(holes: bool) -> str:
    into = 'in (".", "O")' if holes else '== "."'
    return (f'tile == "B" and grid[y + 2 * dy][x + 2 * dx] {into}:\n'
            '        grid[y + 2 * dy][x + 2 * dx] = "B" if grid[y + 2 * dy][x + 2 * dx] == "." else "."\n'
            "        moved = True")  # fmt: skip


_GOLD_ENEMIES = [
    '    if status == "playing":',
    '        ways = {"<": (-1, 0), ">": (1, 0), "^": (0, -1), "v": (0, 1)}',
    '        flip = {"<": ">", ">": "<", "^": "v", "v": "^"}',
    "        enemies = [(ex, ey) for ey, row in enumerate(grid) for ex, c in enumerate(row) if c in ways]",
    "        for ex, ey in enemies:",
    "            c = grid[ey][ex]",
    "            nx, ny = ex + ways[c][0], ey + ways[c][1]",
    '            if grid[ny][nx] == "@":',
    '                status = "lost"',
    "                break",
    '            if grid[ny][nx] == ".":',
    '                grid[ny][nx], grid[ey][ex] = c, "."',
    "            else:",
    "                grid[ey][ex] = flip[c]",
]
