"""Valid gold answers for reasoning-gym generators that score a solution's validity and store none.

- rush_hour: breadth-first search over board states for a shortest sequence of slides.
- boxnet: a plan that walks each box to its target's square one step per turn, then matches it.
Both return text in the format the generator's prompt asks for and its scorer parses. Not here: the
generators whose metadata already holds a valid answer (see `reasoning_gym._GOLD_ANSWERS`).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

_BOARD = 6
_TARGET_ROW = 2
_EXIT_COLUMN = _BOARD - 2  # where the red car's left cell is when it leaves


def _pieces(board_config: str) -> tuple[list[tuple[int, int, bool]], set[int]]:
    """(start cell, size, horizontal) per movable piece in the scorer's order (sorted labels), walls."""
    cells: dict[str, list[int]] = {}
    walls: set[int] = set()
    for index, label in enumerate(board_config):
        if label == "x":
            walls.add(index)
        elif label != "o":
            cells.setdefault(label, []).append(index)
    pieces = [(cells[k][0], len(cells[k]), cells[k][1] - cells[k][0] == 1) for k in sorted(cells)]
    return pieces, walls


def _occupied(state: tuple[int, ...], pieces: list[tuple[int, int, bool]], walls: set[int]) -> set[int]:
    taken = set(walls)
    for start, (_, size, horizontal) in zip(state, pieces, strict=True):
        stride = 1 if horizontal else _BOARD
        taken.update(start + k * stride for k in range(size))
    return taken


def _slides(state: tuple[int, ...], pieces: list[tuple[int, int, bool]], walls: set[int]):  # type: ignore[no-untyped-def]
    """Every (piece, signed distance, next state) one slide away from `state`."""
    taken = _occupied(state, pieces, walls)
    for i, (start, (_, size, horizontal)) in enumerate(zip(state, pieces, strict=True)):
        stride = 1 if horizontal else _BOARD
        line = start % _BOARD if horizontal else start // _BOARD
        for direction in (-1, 1):
            distance = 0
            while True:
                lead = line + (distance + 1) * direction + (size - 1 if direction > 0 else 0)
                cell = start + ((distance + 1) * direction + (size - 1 if direction > 0 else 0)) * stride
                if not 0 <= lead < _BOARD or cell in taken:
                    break
                distance += 1
                yield (
                    i,
                    distance * direction,
                    state[:i] + (start + distance * direction * stride,) + state[i + 1 :],
                )


def rush_hour_solution(entry: dict[str, Any]) -> str:
    """A shortest move list (`A+2 B-1 ...`) that drives the red car (piece A) to the exit."""
    pieces, walls = _pieces(entry["metadata"]["board_config"])
    start = tuple(piece[0] for piece in pieces)
    goal = _TARGET_ROW * _BOARD + _EXIT_COLUMN
    parents: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[0] == goal:
            return _path(parents, state)
        for piece, distance, nxt in _slides(state, pieces, walls):
            if nxt not in parents:
                parents[nxt] = (state, f"{chr(ord('A') + piece)}{distance:+d}")
                queue.append(nxt)
    raise ValueError("rush_hour board has no solution")


def _path(parents: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None], state: tuple[int, ...]) -> str:
    moves: list[str] = []
    link = parents[state]
    while link is not None:
        state, move = link
        moves.append(move)
        link = parents[state]
    return " ".join(reversed(moves))


def _square(key: str) -> tuple[float, float]:
    row, col = key.split("_")
    return float(row), float(col)


def boxnet_plan(entry: dict[str, Any]) -> str:
    """A JSON list of one-action steps moving every box to its target square, then onto the target."""
    state: dict[str, list[str]] = entry["metadata"]["initial_state"]
    targets: dict[str, list[str]] = {}
    for key, items in state.items():
        for item in items:
            if item.startswith("target_"):
                targets.setdefault(item[len("target_") :], []).append(key)
    steps: list[dict[str, str]] = []
    for key, items in state.items():
        for box in (item for item in items if item.startswith("box_")):
            colour = box[len("box_") :]
            here, there = _square(key), _square(targets[colour].pop())
            while here != there:
                axis = 0 if here[0] != there[0] else 1
                step = 1.0 if there[axis] > here[axis] else -1.0
                nxt = (here[0] + step, here[1]) if axis == 0 else (here[0], here[1] + step)
                steps.append({f"Agent[{here[0]}, {here[1]}]": f"move({box}, square[{nxt[0]}, {nxt[1]}])"})
                here = nxt
            steps.append({f"Agent[{here[0]}, {here[1]}]": f"move({box}, target_{colour})"})
    return json.dumps(steps)
