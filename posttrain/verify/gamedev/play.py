"""`GamePlayVerifier` (`gamedev_play`): game code graded by scripted play-throughs against the trusted engine.

`Task.gold` (a dict, or its JSON text): `game` (a key of `GAMES`: `grid`, `motion`, `launch`),
`entry_point` (the function the response defines), `fixed` (the task's own play-throughs), `random`
(`count` and the shape of the play-throughs drawn per grading) and whatever else the game's functions
read (`tiles`, `actions`, `features`, `world`).

How a response is graded: this module writes a `code_tests` task whose tests are the engine's own
sources (`script.py` + `grid.py` or `physics.py`, sibling imports removed: the names are already there),
the gold as a literal, and `check(candidate)` with one `assert play(candidate, i)` per play-through. The
tests run in the harness's trusted parent (`posttrain.verify.code_harness`): the program runs in a fresh
interpreter that never held the engine, the tests or the seed, and is called through a proxy with plain data
only (a result with a lying `__eq__` cannot even be sent). Each play-through calls the candidate step by
step and compares every result with the engine's (`grid_judge`, `motion_judge`, `launch_judge`).
`setup` carries `PLAY_SEED`, drawn on the host per grading with `secrets` (or `GamePlayConfig.seed`):
the random play-throughs are new at every grading, so fitting a program to the scripted ones does not
pay. A correct program scores 1.0 every time; a wrong one may fail different play-throughs on different
gradings.

Failure attribution is `code_tests`'s (a wrong step, a crash, a timeout: the model's; gold that is not a
game, a sandbox error: infra). Details: `code_tests`'s, plus `playthroughs` ([{"name", "status"}], one
per play-through, `fixed-1`... then `random-1`..., status `pass` | `fail` | `error` | `timeout` |
`not_run`). Not here: the engine's rules (`grid.py`, `physics.py`), the sandbox (`posttrain.sandbox`).
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, gold_json
from posttrain.verify.code import POOL_SIZE, CodeTestsVerifier
from posttrain.verify.configs import CodeTestsConfig, GamePlayConfig
from posttrain.verify.gamedev import grid, physics, script

FUTURE = "from __future__ import annotations"


@dataclass(frozen=True)
class Game:
    """A game the verifier can play: the engine modules to embed and the two functions it calls."""

    modules: tuple[ModuleType, ...]
    """Embedded in this order (a module's sibling imports must come before it)."""
    cases: str
    """`cases(spec, seed) -> [case]`: the fixed play-throughs, then the random ones."""
    judge: str
    """`judge(candidate, case, spec) -> bool`: whether the candidate plays this case right."""


GAMES: dict[str, Game] = {
    "grid": Game((script, grid), "grid_cases", "grid_judge"),
    "motion": Game((script, physics), "motion_cases", "motion_judge"),
    "launch": Game((script, physics), "launch_cases", "launch_judge"),
}


@functools.cache
def engine_source(game: str) -> str:
    """The game's engine modules as one source: one `__future__` import on top, sibling imports removed.
    `RuntimeError` if anything of posttrain would still be imported (the sandbox has no posttrain)."""
    kept = [FUTURE]
    for module in GAMES[game].modules:
        for line in Path(str(module.__file__)).read_text(encoding="utf-8").splitlines():
            if line != FUTURE and not line.startswith("from posttrain.verify.gamedev."):
                kept.append(line)
    source = "\n".join(kept) + "\n"
    if "import posttrain" in source or "from posttrain" in source:
        raise RuntimeError(f"the {game} engine imports posttrain outside its sibling modules")
    return source


@functools.lru_cache(maxsize=1024)
def tests_source(gold_text: str) -> str:
    """`check(candidate)` for one task: the engine, the gold as `SPEC`, one assert per play-through."""
    gold = json.loads(gold_text)
    game = GAMES[gold["game"]]
    asserts = "".join(f"    assert play(candidate, {i})\n" for i in range(len(playthrough_names(gold))))
    return (f"{engine_source(gold['game'])}\n\nSPEC = {gold!r}\nCASES = []\n\n\n"
            "def play(candidate, index):\n"
            "    if not CASES:\n"
            f"        CASES.extend({game.cases}(SPEC, PLAY_SEED))\n"
            f"    return {game.judge}(candidate, CASES[index], SPEC)\n\n\n"
            f"def check(candidate):\n{asserts}")  # fmt: skip


def playthrough_names(gold: dict[str, Any]) -> list[str]:
    fixed = [f"fixed-{i + 1}" for i in range(len(gold["fixed"]))]
    return fixed + [f"random-{i + 1}" for i in range(int(gold["random"]["count"]))]


def parse_gold(task: Task) -> dict[str, Any]:
    gold = gold_json(task)
    if not isinstance(gold, dict) or not isinstance(gold.get("game"), str) or gold["game"] not in GAMES:
        raise GoldError(f"gold must be a dict whose game is one of {sorted(GAMES)}")
    if not isinstance(gold.get("entry_point"), str) or not str(gold["entry_point"]).isidentifier():
        raise GoldError("gold needs an entry_point")
    try:
        names = playthrough_names(gold)
    except (KeyError, TypeError, ValueError) as exc:
        raise GoldError(f"gold needs fixed and random play-throughs: {type(exc).__name__}: {exc}") from None
    if not names:
        raise GoldError("gold has no play-throughs")
    return gold


class GamePlayVerifier:
    """Grades game code in the `code_tests` sandbox pool; `score_many` runs a whole batch concurrently."""

    def __init__(self, config: GamePlayConfig, pool_size: int = POOL_SIZE) -> None:
        self.config = config
        self.code = CodeTestsVerifier(CodeTestsConfig(timeout_s=config.timeout_s, memory_mb=config.memory_mb),
                                      pool_size)  # fmt: skip

    def score(self, task: Task, response: str) -> Score:
        return self.score_many([(task, response)])[0]

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per (task, response), in order; bad gold is infra for its item only."""
        prepared = [self._prepare(task) for task, _ in items]
        runnable = [(ready[0], response) for ready, (_, response) in zip(prepared, items, strict=True)
                    if not isinstance(ready, Score)]  # fmt: skip
        graded = iter(self.code.score_many(runnable))
        return [ready if isinstance(ready, Score) else _with_playthroughs(next(graded), ready[1]) for ready in prepared]

    def close(self) -> None:
        """Remove the sandbox pool (a later `score` starts a new one)."""
        self.code.close()

    def _prepare(self, task: Task) -> tuple[Task, list[str]] | Score:
        """The `code_tests` task that plays this one, with the play-throughs' names; infra on bad gold."""
        try:
            gold = parse_gold(task)
            tests = tests_source(json.dumps(gold, sort_keys=True, allow_nan=False))
        except GoldError as exc:
            return Score.infra(f"task {task.id}: {exc}")
        except Exception as exc:  # noqa: BLE001 - gold this module cannot turn into tests: never the model's fault
            return Score.infra(f"task {task.id}: unusable gold: {type(exc).__name__}: {exc}"[:500])
        seed = self.config.seed if self.config.seed is not None else secrets.randbits(62)
        code_gold = {"language": "python", "style": "function", "prompt": "", "entry_point": gold["entry_point"],
                     "tests": tests, "setup": f"PLAY_SEED = {seed}\n"}  # fmt: skip
        return task.model_copy(update={"gold": code_gold}), playthrough_names(gold)


def _with_playthroughs(score: Score, names: list[str]) -> Score:
    """`score` with each play-through's name beside its test status, and the failed ones in the message."""
    statuses = score.details.get("tests")
    if score.is_infra_failure or not isinstance(statuses, list) or len(statuses) != len(names):
        return score
    played = [{"name": name, "status": status} for name, status in zip(names, statuses, strict=True)]
    update: dict[str, Any] = {"details": {**score.details, "playthroughs": played}}
    if not score.passed:
        failed = [name for name, status in zip(names, statuses, strict=True) if status != "pass"]
        update["message"] = f"{score.message}; play-throughs not passed: {', '.join(failed)}"[:500]
    return score.model_copy(update=update)
