"""`GameLevelVerifier` (`gamedev_level`): a grid level written as text, checked host-side against a spec.

`Task.gold` (a dict, or its JSON text) is the spec: `width` and `height` ([fewest, most] cells, border
included), `tiles` (tiles allowed besides `#`, `.`, `@`, `G`), and any of `moves` ([fewest, most] moves
of the shortest solution), `coins` ({"reachable": k, "unreachable": m}), `route` ([fewest, most] moves of
the shortest play that collects every coin reachable from `@` and then reaches the goal), `doors` (exactly n doors and n
keys, and every door needed: with any one door turned into a wall the goal cannot be reached), `start`
([column, row] of `@`, from 0 at the top-left).

The level is the response's last fenced block (else the whole text), one row per non-blank line, each
line stripped. Checks, in order: `shape` (rectangular, within the size bounds), `tiles`, `border` (all
walls), `pieces` (one `@`, one `G`), `start`, `counts` (the coins, keys and doors the spec asks for, so that the
search below stays bounded); then, with the rules of `grid.py` and its BFS `solve`, `solvable` and each
of `moves`, `coins`, `route`, `doors` the spec names. The reward is 1.0 when every check passes, else 0.
No program runs: nothing from the response is executed, so there is no sandbox. Failure attribution:
any level that fails a check is the model's; gold that is not a spec is infra (`GoldError`).
Details: `checks` (name -> `pass` | `fail` | `not_run`), `size` ([width, height]), `moves`, `route`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.configs import GameLevelConfig
from posttrain.verify.gamedev.grid import COIN, DOOR, FLOOR, GOAL, KEY, PLAYER, WALL, reachable, solve

BASE_TILES = "#.@G"
MAX_LINES = 64
"""Responses with more lines (or longer ones) fail `shape` before any other work."""
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class LevelSpec:
    """What a level must satisfy (see the module docstring)."""

    width: tuple[int, int]
    height: tuple[int, int]
    tiles: str
    moves: tuple[int, int] | None = None
    coins: tuple[int, int] | None = None
    """(reachable, unreachable)."""
    route: tuple[int, int] | None = None
    doors: int | None = None
    start: tuple[int, int] | None = None
    """(column, row) where `@` must stand, counted from 0 at the top-left corner."""

    @classmethod
    def from_gold(cls, gold: Any) -> LevelSpec:
        if isinstance(gold, str):
            try:
                gold = json.loads(gold)
            except ValueError as exc:
                raise GoldError(f"gold is not JSON: {exc}") from None
        if not isinstance(gold, dict):
            raise GoldError("gold of a level task must be a dict")
        try:
            coins = gold.get("coins")
            return cls(width=_pair(gold["width"]), height=_pair(gold["height"]), tiles=str(gold.get("tiles", "")),
                       moves=_pair(gold["moves"]) if gold.get("moves") else None,
                       coins=(int(coins["reachable"]), int(coins["unreachable"])) if coins else None,
                       route=_pair(gold["route"]) if gold.get("route") else None,
                       doors=int(gold["doors"]) if gold.get("doors") else None,
                       start=_pair(gold["start"]) if gold.get("start") else None)  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise GoldError(f"bad level spec: {type(exc).__name__}: {exc}") from None

    def to_gold(self) -> dict[str, Any]:
        gold: dict[str, Any] = {"width": list(self.width), "height": list(self.height), "tiles": self.tiles}
        optional = {"moves": self.moves and list(self.moves), "route": self.route and list(self.route),
                    "coins": self.coins and {"reachable": self.coins[0], "unreachable": self.coins[1]},
                    "doors": self.doors, "start": self.start and list(self.start)}  # fmt: skip
        return gold | {key: value for key, value in optional.items() if value}


def _pair(value: Any) -> tuple[int, int]:
    low, high = value
    return int(low), int(high)


def parse_level(response: str) -> list[str]:
    """The level's rows: the last fenced block (else the text), non-blank lines, stripped."""
    blocks = _FENCE.findall(response)
    text = blocks[-1] if blocks else response
    return [line.strip() for line in text.splitlines() if line.strip()]


def check_level(spec: LevelSpec, rows: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """(check name -> pass | fail | not_run, facts found) for one level."""
    facts: dict[str, Any] = {"size": [len(rows[0]) if rows else 0, len(rows)]}
    checks: dict[str, str] = {}
    for name, rule in STATIC_CHECKS:
        checks[name] = "not_run" if "fail" in checks.values() else _verdict(rule(spec, rows))
    searched = ["solvable"] + [name for name, value in
                               (("moves", spec.moves), ("coins", spec.coins), ("route", spec.route), ("doors", spec.doors))
                               if value]  # fmt: skip
    if any(verdict != "pass" for verdict in checks.values()):
        return checks | {name: "not_run" for name in searched}, facts
    facts["moves"] = solve(rows)
    checks["solvable"] = _verdict(facts["moves"] is not None)
    if spec.moves:
        checks["moves"] = _verdict(facts["moves"] is not None and spec.moves[0] <= facts["moves"] <= spec.moves[1])
    if spec.coins:
        near = sum(rows[y][x] == COIN for x, y in reachable(rows))
        checks["coins"] = _verdict((near, _count(rows, COIN) - near) == spec.coins)
    if spec.route:
        facts["route"] = route_length(rows)
        checks["route"] = _verdict(facts["route"] is not None and spec.route[0] <= facts["route"] <= spec.route[1])
    if spec.doors:
        checks["doors"] = _verdict(all(solve(_walled(rows, x, y)) is None for x, y in _positions(rows, DOOR)))
    return checks, facts


def route_length(rows: list[str]) -> int | None:
    """The fewest moves that collect every coin reachable from `@` and then reach `G` (None if none)."""
    near = reachable(rows)
    kept = ["".join(FLOOR if tile == COIN and (x, y) not in near else tile for x, tile in enumerate(row))
            for y, row in enumerate(rows)]  # fmt: skip
    return solve(kept, collect_coins=True)


def _verdict(ok: bool) -> str:
    return "pass" if ok else "fail"


def _shape(spec: LevelSpec, rows: list[str]) -> bool:
    if not rows or len(rows) > MAX_LINES or any(len(row) != len(rows[0]) for row in rows):
        return False
    return spec.width[0] <= len(rows[0]) <= spec.width[1] and spec.height[0] <= len(rows) <= spec.height[1]


def _tiles(spec: LevelSpec, rows: list[str]) -> bool:
    return set("".join(rows)) <= set(BASE_TILES + spec.tiles)


def _border(spec: LevelSpec, rows: list[str]) -> bool:
    edges = rows[0] + rows[-1] + "".join(row[0] + row[-1] for row in rows)
    return set(edges) == {WALL}


def _pieces(spec: LevelSpec, rows: list[str]) -> bool:
    return _count(rows, PLAYER) == 1 and _count(rows, GOAL) == 1


def _start(spec: LevelSpec, rows: list[str]) -> bool:
    return spec.start is None or rows[spec.start[1]][spec.start[0]] == PLAYER


def _counts(spec: LevelSpec, rows: list[str]) -> bool:
    coins_ok = spec.coins is None or _count(rows, COIN) == sum(spec.coins)
    doors_ok = spec.doors is None or _count(rows, DOOR) == _count(rows, KEY) == spec.doors
    return coins_ok and doors_ok


STATIC_CHECKS = (("shape", _shape), ("tiles", _tiles), ("border", _border), ("pieces", _pieces), ("start", _start),
                 ("counts", _counts))
"""Checks that need no search, in order; a later one runs only when the earlier ones pass."""


def _count(rows: list[str], tile: str) -> int:
    return sum(row.count(tile) for row in rows)


def _positions(rows: list[str], tile: str) -> list[tuple[int, int]]:
    return [(x, y) for y, row in enumerate(rows) for x, here in enumerate(row) if here == tile]


def _walled(rows: list[str], x: int, y: int) -> list[str]:
    return [row[:x] + WALL + row[x + 1:] if i == y else row for i, row in enumerate(rows)]


class GameLevelVerifier:
    """Grades text levels against their task's spec; pure and host-side."""

    def __init__(self, config: GameLevelConfig) -> None:
        self.config = config

    @guarded
    def score(self, task: Task, response: str) -> Score:
        spec = LevelSpec.from_gold(task.gold)
        checks, facts = check_level(spec, parse_level(response))
        failed = [name for name, verdict in checks.items() if verdict == "fail"]
        if failed:
            return Score.wrong(0.0, f"level fails: {', '.join(failed)}", checks=checks, **facts)
        return Score.correct(checks=checks, **facts)
