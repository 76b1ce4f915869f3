"""`gamedev/level/<kind>@<level>`: design a grid-game level as text to a spec (verifier `gamedev_level`).

| kind | easy | medium | hard |
|---|---|---|---|
| `maze` | 5-7 cells a side, shortest solution about 3-6 moves | 6-9, about 7-12 | 8-11, about 14-22 |
| `coins` | 1-3 reachable coins | 2-4, + 1-2 walled-off coins | + the all-coins route's length |
| `keys` | one key and one door, the door needed | two of each | three of each |

Every task also fixes the level's exact size and the player's start (so that tasks differ by more than
a few numbers and split into train and eval), and all but `coins@hard` the shortest solution's range.
A spec is a `posttrain.verify.gamedev.levels.LevelSpec`; the gold level is generated here (a carved maze,
or a room split by walls) and its spec drawn around what it measures (e.g. a shortest solution of d moves
gives a range such as [d - 1, d + 2]), so the spec is always satisfiable. Every generated level is
checked with the verifier's own `check_level` and regenerated until it passes, so the answer scores 1.0.
Guarantees: deterministic in the RNG. Not here: the checks themselves, the solver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrain.verify.gamedev.grid import COIN, DOOR, FLOOR, GOAL, KEY, PLAYER, WALL, find, solve
from posttrain.verify.gamedev.levels import LevelSpec, check_level, route_length
from posttrain.verify.gamedev.script import Rng

Rows = list[list[str]]
SIZES = {"easy": (5, 7), "medium": (6, 9), "hard": (8, 11)}
"""Level -> (smallest, largest) width and height of maze and coins levels."""
DISTANCES = {"easy": (3, 6), "medium": (7, 12), "hard": (14, 22)}
"""Level -> the band a maze's start-to-goal distance is drawn in."""
OPENINGS = {"easy": 0.6, "medium": 0.25, "hard": 0.05}
"""Level -> the share of a carved maze's inner walls knocked out (open rooms at easy)."""
DOORS = {"easy": 1, "medium": 2, "hard": 3}
MAX_TRIES = 500


def level_task(kind: str, level: str, rng: Rng) -> tuple[str, dict[str, Any], str]:
    """(prompt, gold spec, answer) of one level task."""
    spec, rows = MAKERS[kind](level, rng)
    return prompt(spec), spec.to_gold(), "```\n" + "\n".join(rows) + "\n```"


def _retry(make: Callable[[], tuple[LevelSpec, list[str]] | None]) -> tuple[LevelSpec, list[str]]:
    for _ in range(MAX_TRIES):
        made = make()
        if made is not None and set(check_level(*made)[0].values()) == {"pass"}:
            return made
    raise RuntimeError("no level met its spec")


def _around(rng: Rng, value: int, low: int = 2) -> tuple[int, int]:
    """A range holding `value`: a little below and above it."""
    return max(low, value - rng.between(0, 2)), value + rng.between(0, 3)


def _spec_of(rows: list[str], **fields: Any) -> LevelSpec:
    """The spec of a level of exactly this size with `@` where it is in `rows`, plus `fields`: a task
    fixes its size and start, so that tasks differ (and split) by more than their few numbers."""
    size = (len(rows[0]), len(rows))
    return LevelSpec(width=(size[0], size[0]), height=(size[1], size[1]), start=find(rows, PLAYER), **fields)


def _room(width: int, height: int) -> Rows:
    return [[WALL] * width] + [[WALL] + [FLOOR] * (width - 2) + [WALL] for _ in range(height - 2)] + [[WALL] * width]


def _text(rows: Rows) -> list[str]:
    return ["".join(row) for row in rows]


def _free(rows: Rows, columns: range | None = None) -> list[tuple[int, int]]:
    return [(x, y) for y, row in enumerate(rows) for x, tile in enumerate(row)
            if tile == FLOOR and (columns is None or x in columns)]  # fmt: skip


# ---------------------------------------------------------------- maze
def make_maze(level: str, rng: Rng) -> tuple[LevelSpec, list[str]]:
    low, high = SIZES[level]
    nearest, farthest = DISTANCES[level]

    def attempt() -> tuple[LevelSpec, list[str]] | None:
        rows = carve(rng, rng.between(low, high), rng.between(low, high), OPENINGS[level])
        (sx, sy), = _sample(rng, _free(rows), 1)
        rows[sy][sx] = PLAYER
        far = [cell for cell, steps in distances(_text(rows)).items() if nearest <= steps <= farthest]
        if not far:
            return None
        gx, gy = far[rng.below(len(far))]
        rows[gy][gx] = GOAL
        moves = solve(_text(rows))
        if moves is None:
            return None
        return _spec_of(_text(rows), tiles="", moves=_around(rng, moves)), _text(rows)

    return _retry(attempt)


def carve(rng: Rng, width: int, height: int, openings: float) -> Rows:
    """A maze carved by randomised depth-first search over the odd cells, then `openings` of the inner
    walls between two passages knocked out."""
    rows = [[WALL] * width for _ in range(height)]
    cells = {(x, y) for y in range(1, height - 1, 2) for x in range(1, width - 1, 2)}
    stack = [sorted(cells)[rng.below(len(cells))]]
    rows[stack[0][1]][stack[0][0]] = FLOOR
    while stack:
        x, y = stack[-1]
        options = [(x + dx, y + dy, dx, dy) for dx, dy in ((2, 0), (-2, 0), (0, 2), (0, -2))
                   if (x + dx, y + dy) in cells and rows[y + dy][x + dx] == WALL]  # fmt: skip
        if not options:
            stack.pop()
            continue
        nx, ny, dx, dy = options[rng.below(len(options))]
        rows[y + dy // 2][x + dx // 2] = rows[ny][nx] = FLOOR
        stack.append((nx, ny))
    for x, y in _between_passages(rows):
        if rng.uniform(0.0, 1.0) < openings:
            rows[y][x] = FLOOR
    return rows


def _between_passages(rows: Rows) -> list[tuple[int, int]]:
    """Inner walls with floor on both sides (left and right, or above and below)."""
    return [(x, y) for y in range(1, len(rows) - 1) for x in range(1, len(rows[0]) - 1) if rows[y][x] == WALL
            and ((rows[y][x - 1] == rows[y][x + 1] == FLOOR) or (rows[y - 1][x] == rows[y + 1][x] == FLOOR))]


def distances(rows: list[str]) -> dict[tuple[int, int], int]:
    """Moves from `@` to every floor cell (walls block)."""
    start = find(rows, PLAYER)
    seen, frontier, steps = {start: 0}, [start], 0
    while frontier:
        steps += 1
        following = []
        for x, y in frontier:
            for cell in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                if cell not in seen and rows[cell[1]][cell[0]] == FLOOR:
                    seen[cell] = steps
                    following.append(cell)
        frontier = following
    return seen


# ---------------------------------------------------------------- coins
def make_coins(level: str, rng: Rng) -> tuple[LevelSpec, list[str]]:
    """A room with a few walls; with coins out of reach, its last one or two columns walled off."""
    low, high = SIZES[level]
    near = rng.between(1, 3) if level == "easy" else rng.between(2, 4)
    far = 0 if level == "easy" else rng.between(1, 2)

    def attempt() -> tuple[LevelSpec, list[str]] | None:
        width, height = rng.between(max(low, 6), high), rng.between(low, high)
        rows = _room(width, height)
        sealed_from = width - 1 - rng.between(1, 2) if far else width - 1
        for y in range(1, height - 1):
            rows[y][sealed_from] = WALL
        inside, outside = range(1, sealed_from), range(sealed_from + 1, width - 1)
        for x, y in _sample(rng, _free(rows, inside), rng.between(0, 3)):
            rows[y][x] = WALL
        pieces = [PLAYER, GOAL] + [COIN] * near
        spots, sealed = _sample(rng, _free(rows, inside), len(pieces)), _sample(rng, _free(rows, outside), far)
        if len(spots) < len(pieces) or len(sealed) < far:
            return None
        for tile, (x, y) in zip(pieces + [COIN] * far, spots + sealed, strict=True):
            rows[y][x] = tile
        text = _text(rows)
        steps = route_length(text) if level == "hard" else solve(text)
        if steps is None:
            return None
        limits = {"route" if level == "hard" else "moves": _around(rng, steps)}
        return _spec_of(text, tiles=COIN, coins=(near, far), **limits), text

    return _retry(attempt)


def _sample(rng: Rng, cells: list[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    cells = list(cells)
    rng.shuffle(cells)
    return cells[:count]


# ---------------------------------------------------------------- keys
def make_keys(level: str, rng: Rng) -> tuple[LevelSpec, list[str]]:
    """A room cut by full-height walls, one door in each; a key before every door, the goal after the
    last: every door is needed."""
    doors = DOORS[level]
    widths, heights = (3 * doors + 4, 3 * doors + 7), (4, 7)

    def attempt() -> tuple[LevelSpec, list[str]] | None:
        width, height = rng.between(*widths), rng.between(*heights)
        rows = _room(width, height)
        sizes = [2] * (doors + 1)
        for _ in range(width - 2 - doors - sum(sizes)):
            sizes[rng.below(doors + 1)] += 1
        chambers, x = [], 1
        for size in sizes:
            chambers.append(range(x, x + size))
            x += size + 1
        for chamber in chambers[:-1]:
            for y in range(1, height - 1):
                rows[y][chamber.stop] = WALL
            rows[rng.between(1, height - 2)][chamber.stop] = DOOR
        starts = _sample(rng, _free(rows, chambers[0]), 2)
        keys = [_sample(rng, _free(rows, chamber), 1)[0] for chamber in chambers[1:-1]]
        (gx, gy), = _sample(rng, _free(rows, chambers[-1]), 1)
        for tile, (x, y) in zip([PLAYER, KEY] + [KEY] * len(keys) + [GOAL], starts + keys + [(gx, gy)], strict=True):
            rows[y][x] = tile
        text = _text(rows)
        moves = solve(text)
        return None if moves is None else (_spec_of(text, tiles=KEY + DOOR, doors=doors, moves=_around(rng, moves)), text)

    return _retry(attempt)


MAKERS: dict[str, Callable[[str, Rng], tuple[LevelSpec, list[str]]]] = {
    "maze": make_maze, "coins": make_coins, "keys": make_keys,
}


# ---------------------------------------------------------------- prompt
def prompt(spec: LevelSpec) -> str:
    tiles = ["'#' wall", "'.' floor", "'@' player (exactly one)", "'G' goal (exactly one)"]
    tiles += [name for tile, name in (("$", "'$' coin"), ("k", "'k' key"), ("D", "'D' door")) if tile in spec.tiles]
    wants = [f"the shortest way from '@' to 'G' takes {spec.moves[0]} to {spec.moves[1]} moves" if spec.moves else "",
             (f"exactly {_n(spec.coins[0], 'coin')} the player can reach and exactly {spec.coins[1]} it cannot"
              if spec.coins else ""),
             (f"collecting every reachable coin and then reaching 'G' takes {spec.route[0]} to {spec.route[1]} "
              "moves at best" if spec.route else ""),
             (f"exactly {_n(spec.doors, 'key')} and {_n(spec.doors, 'door')}, and every door needed (with any "
              "one door made a wall, 'G' cannot be reached)" if spec.doors else ""),
             "'G' can be reached"]  # fmt: skip
    rules = "The player moves up, down, left or right onto any tile but '#'; stepping on 'G' ends the game."
    if spec.doors:
        rules += " Moving onto 'k' picks up a key; moving onto 'D' uses one up (with no key a door blocks)."
    return "\n".join([
        "Design a level for a grid game, as rows of text of equal length.",
        f"Tiles: {', '.join(tiles)}. The outer border must be all '#'.",
        f"Size: {_span(spec.width)} columns, {_span(spec.height)} rows."
        + (f" '@' at column {spec.start[0]}, row {spec.start[1]} (0, 0 is the top-left corner)." if spec.start else ""),
        rules,
        "Requirements: " + "; ".join(w for w in wants if w) + ".",
        "Reply with the level in a ``` block.",
    ])  # fmt: skip



def _span(bounds: tuple[int, int]) -> str:
    return str(bounds[0]) if bounds[0] == bounds[1] else f"{bounds[0]} to {bounds[1]}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
