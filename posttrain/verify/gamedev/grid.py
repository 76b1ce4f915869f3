"""The grid world of the gamedev domains: one turn of play (`grid_step`), a solver, random levels.

State, plain data (what a candidate `step` receives and must return):
`{"grid": [str, ...], "coins": int, "keys": int, "status": "playing" | "won" | "lost"}`. The grid's rows
are equal-length strings of tiles: `#` wall, `.` floor, `@` the player (exactly one), `$` coin, `k` key,
`D` door, `G` goal, `B` box, `O` hole, and enemies `<` `>` `^` `v` (each walking the way it points).
Actions: `up` (towards row 0), `down`, `left`, `right`, `wait`.

One turn (`grid_step(state, action)`):
1. A state whose status is not `playing` is returned unchanged.
2. The player tries to enter the next cell: floor moves; a coin is collected (`coins + 1`), a key picked
   up (`keys + 1`); a door opens only with a key (`keys - 1`, the door is gone), else blocks; the goal
   ends the game (`won`, the player stands on it); a box is pushed one cell on when the cell behind it is
   floor, or falls into a hole there (box and hole both become floor), else nothing moves; an enemy ends
   the game (`lost`, nothing moves); walls, holes and the grid's edge block. The cell left becomes floor.
3. Still playing: the enemies move one at a time, in reading order of where they stood before any of
   them moved: onto floor an enemy steps; onto the player it ends the game (`lost`, no further enemy
   moves); anything else turns it round (`<` <-> `>`, `^` <-> `v`) where it stands.

Also here: `solve` (fewest moves to the goal, BFS), `reachable`, `random_grid`, and the play-throughs of
the logic domains (`grid_cases`, `grid_judge`). Guarantees: deterministic; inputs are never changed.
The module imports nothing at run time but its sibling `script` (the play-through grader embeds both
sources in the trusted harness, see `posttrain.verify.gamedev.play`). Not here: prompts, level specs.
"""

from __future__ import annotations

from posttrain.verify.gamedev.script import Rng, case_seed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

WALL, FLOOR, PLAYER, COIN, KEY, DOOR, GOAL, BOX, HOLE = "#", ".", "@", "$", "k", "D", "G", "B", "O"
MOVES = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0), "wait": (0, 0)}
DIRECTIONS = ("up", "down", "left", "right")
ENEMY_MOVES = {"<": (-1, 0), ">": (1, 0), "^": (0, -1), "v": (0, 1)}
TURNED = {"<": ">", ">": "<", "^": "v", "v": "^"}
PLAYING, WON, LOST = "playing", "won", "lost"
TILE_COUNTS = {"$": (1, 3), "k": (1, 2), "D": (1, 2), "G": (1, 1), "B": (1, 3), "O": (1, 2),
               "<": (1, 1), ">": (1, 1), "^": (0, 1), "v": (0, 1)}  # fmt: skip
"""Tile -> (fewest, most) placed by `random_grid`."""


def new_state(rows: list[str], coins: int = 0, keys: int = 0) -> dict[str, Any]:
    """A state at the start of play."""
    return {"grid": list(rows), "coins": coins, "keys": keys, "status": PLAYING}


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    return {"grid": list(state["grid"]), "coins": state["coins"], "keys": state["keys"], "status": state["status"]}


def grid_step(state: dict[str, Any], action: str) -> dict[str, Any]:
    """The state after one turn (the reference every candidate `step` is compared with)."""
    return step_events(state, action)[0]


def step_events(state: dict[str, Any], action: str) -> tuple[dict[str, Any], list[str]]:
    """The state after one turn, and what happened in it (`move`, `coin`, `push`, `caught`, ...)."""
    if action not in MOVES:
        raise ValueError(f"unknown action {action!r}")
    if state["status"] != PLAYING:
        return copy_state(state), ["over"]
    turn = Turn(state)
    turn.player(*MOVES[action])
    if turn.status == PLAYING:
        turn.enemies()
    return turn.result(), turn.events


class Turn:
    """One turn in progress: mutable rows and counters, and the events so far."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.rows = [list(row) for row in state["grid"]]
        self.coins: int = state["coins"]
        self.keys: int = state["keys"]
        self.status: str = state["status"]
        self.events: list[str] = []

    def at(self, x: int, y: int) -> str:
        if 0 <= y < len(self.rows) and 0 <= x < len(self.rows[y]):
            return self.rows[y][x]
        return WALL

    def result(self) -> dict[str, Any]:
        return {"grid": ["".join(row) for row in self.rows], "coins": self.coins, "keys": self.keys,
                "status": self.status}  # fmt: skip

    def player(self, dx: int, dy: int) -> None:
        if dx == dy == 0:
            self.events.append("wait")
            return
        x, y = find(self.rows, PLAYER)
        tx, ty = x + dx, y + dy
        if PLAYER_RULES.get(self.at(tx, ty), Turn.block)(self, tx, ty, dx, dy):
            self.rows[y][x] = FLOOR
            self.rows[ty][tx] = PLAYER

    def walk(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.events.append("move")
        return True

    def coin(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.coins += 1
        self.events.append("coin")
        return True

    def key(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.keys += 1
        self.events.append("key")
        return True

    def door(self, x: int, y: int, dx: int, dy: int) -> bool:
        if self.keys <= 0:
            self.events.append("locked")
            return False
        self.keys -= 1
        self.events.append("door")
        return True

    def goal(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.status = WON
        self.events.append("won")
        return True

    def push(self, x: int, y: int, dx: int, dy: int) -> bool:
        behind = self.at(x + dx, y + dy)
        if behind not in (FLOOR, HOLE):
            self.events.append("stuck")
            return False
        self.rows[y + dy][x + dx] = BOX if behind == FLOOR else FLOOR
        self.events.append("push" if behind == FLOOR else "fill")
        return True

    def bump(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.status = LOST
        self.events.append("caught")
        return False

    def block(self, x: int, y: int, dx: int, dy: int) -> bool:
        self.events.append("blocked")
        return False

    def enemies(self) -> None:
        movers = [(x, y) for y, row in enumerate(self.rows) for x, tile in enumerate(row) if tile in ENEMY_MOVES]
        for x, y in movers:
            enemy = self.rows[y][x]
            dx, dy = ENEMY_MOVES[enemy]
            ahead = self.at(x + dx, y + dy)
            if ahead == PLAYER:
                self.status = LOST
                self.events.append("caught")
                return
            if ahead == FLOOR:
                self.rows[y + dy][x + dx], self.rows[y][x] = enemy, FLOOR
                self.events.append("patrol")
            else:
                self.rows[y][x] = TURNED[enemy]
                self.events.append("turn")


PLAYER_RULES: dict[str, Callable[[Turn, int, int, int, int], bool]] = {
    FLOOR: Turn.walk, COIN: Turn.coin, KEY: Turn.key, DOOR: Turn.door, GOAL: Turn.goal, BOX: Turn.push,
    **{enemy: Turn.bump for enemy in ENEMY_MOVES},
}
"""The tile the player tries to enter -> what happens (True: the player moves there); others block."""


def find(rows: list[list[str]] | list[str], tile: str) -> tuple[int, int]:
    """(x, y) of the first `tile` in reading order; ValueError when there is none."""
    for y, row in enumerate(rows):
        for x, here in enumerate(row):
            if here == tile:
                return x, y
    raise ValueError(f"no {tile!r} in the grid")


# ---------------------------------------------------------------- levels: reachability and the solver
def reachable(rows: list[str]) -> set[tuple[int, int]]:
    """Cells the player can enter from `@` without keys: walls and doors block, `G` is entered but not
    passed (stepping on it ends the game)."""
    start = find(rows, PLAYER)
    seen, frontier = {start}, [start]
    while frontier:
        x, y = frontier.pop()
        if rows[y][x] == GOAL and (x, y) != start:
            continue
        for dx, dy in MOVES.values():
            cell = (x + dx, y + dy)
            if cell not in seen and _tile(rows, *cell) in (FLOOR, COIN, KEY, GOAL):
                seen.add(cell)
                frontier.append(cell)
    return seen


def solve(rows: list[str], collect_coins: bool = False, max_states: int = 2_000_000) -> int | None:
    """The fewest moves from `@` onto `G` under `grid_step`'s rules (after collecting every coin when
    `collect_coins`), or None when no sequence reaches it. For levels of walls, floor, coins, keys and
    doors: any other tile counts as a wall. BFS over (cell, keys taken, doors opened, coins taken);
    `ValueError` past `max_states` states."""
    bits = {cell: 1 << i for i, cell in enumerate(_cells(rows, KEY) + _cells(rows, DOOR) + _cells(rows, COIN))}
    all_coins = sum(bits[cell] for cell in _cells(rows, COIN)) if collect_coins else 0
    x, y = find(rows, PLAYER)
    frontier = [(x, y, 0)]
    seen = {(x, y, 0)}
    for depth in range(1, max_states + 1):
        following = []
        for x, y, taken in frontier:
            for dx, dy in DIRECTIONS_XY:
                tx, ty = x + dx, y + dy
                tile = _tile(rows, tx, ty)
                if tile == GOAL:
                    if taken & all_coins == all_coins:
                        return depth
                    continue
                after = _enter(rows, bits, tx, ty, tile, taken, collect_coins)
                if after is not None and (tx, ty, after) not in seen:
                    seen.add((tx, ty, after))
                    following.append((tx, ty, after))
        if not following:
            return None
        if len(seen) > max_states:
            raise ValueError(f"more than {max_states} search states")
        frontier = following
    return None


DIRECTIONS_XY = tuple(MOVES[d] for d in DIRECTIONS)


def _enter(rows: list[str], bits: dict[tuple[int, int], int], x: int, y: int, tile: str, taken: int,
           collect_coins: bool) -> int | None:  # fmt: skip
    """The taken-mask after entering (x, y), or None when the player cannot enter it."""
    bit = bits.get((x, y), 0)
    if tile in (FLOOR, PLAYER) or (tile == COIN and not collect_coins):
        return taken
    if tile in (KEY, COIN):
        return taken | bit
    if tile == DOOR:
        if taken & bit:
            return taken
        keys_held = _count(taken, rows, KEY, bits) - _count(taken, rows, DOOR, bits)
        return taken | bit if keys_held > 0 else None
    return None


def _count(taken: int, rows: list[str], tile: str, bits: dict[tuple[int, int], int]) -> int:
    return sum(1 for cell in _cells(rows, tile) if taken & bits[cell])


def _cells(rows: list[str], tile: str) -> list[tuple[int, int]]:
    return [(x, y) for y, row in enumerate(rows) for x, here in enumerate(row) if here == tile]


def _tile(rows: list[str], x: int, y: int) -> str:
    return rows[y][x] if 0 <= y < len(rows) and 0 <= x < len(rows[y]) else WALL


# ---------------------------------------------------------------- random levels and play-throughs
def random_grid(rng: Rng, width: int, height: int, tiles: str, wall_fraction: float = 0.15) -> list[str]:
    """A walled `width` x `height` grid: one player, `TILE_COUNTS` of each of `tiles`, some walls."""
    rows = [[WALL] * width] + [[WALL] + [FLOOR] * (width - 2) + [WALL] for _ in range(height - 2)] + [[WALL] * width]
    inner = [(x, y) for y in range(1, height - 1) for x in range(1, width - 1)]
    rng.shuffle(inner)
    pieces = [PLAYER] + [tile for tile in tiles for _ in range(rng.between(*TILE_COUNTS[tile]))]
    pieces += [WALL] * int(len(inner) * wall_fraction)
    for tile, (x, y) in zip(pieces, inner, strict=False):
        rows[y][x] = tile
    return ["".join(row) for row in rows]


def random_case(spec: dict[str, Any], rng: Rng, name: str) -> dict[str, Any]:
    """A random play-through of `spec` (its tiles, actions and `random` sizes) in which the state
    changes at least once."""
    shape = spec["random"]
    case: dict[str, Any] = {}
    for _ in range(20):
        rows = random_grid(rng, rng.between(*shape["width"]), rng.between(*shape["height"]), spec["tiles"])
        start = new_state(rows, keys=rng.below(2) if DOOR in spec["tiles"] else 0)
        actions = [rng.choice(spec["actions"]) for _ in range(shape["steps"])]
        case = {"name": name, "start": start, "actions": actions}
        if any(event != "blocked" for event in case_events(case)):
            break
    return case


def case_events(case: dict[str, Any]) -> list[str]:
    """Every event of a play-through, in order."""
    state, events = case["start"], []
    for action in case["actions"]:
        state, happened = step_events(state, action)
        events += happened
    return events


def grid_cases(spec: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """The play-throughs of a grading: the task's fixed ones, then `spec["random"]["count"]` drawn from
    `seed` (a fresh host secret per grading)."""
    fixed = [{**case, "name": f"fixed-{i + 1}"} for i, case in enumerate(spec["fixed"])]
    drawn = [random_case(spec, Rng(case_seed(seed, i)), f"random-{i + 1}") for i in range(spec["random"]["count"])]
    return fixed + drawn


def grid_judge(candidate: Callable[..., Any], case: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether `candidate(state, action)` returns exactly the reference state at every step, each step
    starting from the reference's previous state."""
    state = case["start"]
    for action in case["actions"]:
        expected = grid_step(state, action)
        if not same(candidate(copy_state(state), action), expected):
            return False
        state = expected
    return True


def same(got: Any, expected: Any) -> bool:
    """Equal and of exactly the same builtin types all the way down (`True` is not `1`)."""
    if type(got) is not type(expected):
        return False
    if type(expected) is dict:
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
    if type(expected) in (list, tuple):
        return len(got) == len(expected) and all(same(a, b) for a, b in zip(got, expected, strict=True))
    return bool(got == expected)
