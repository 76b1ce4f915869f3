"""Game-development domains on the in-house engine (`posttrain.verify.gamedev`): family kind `gamedev`
(opt-in), class `gamedev`.

Domains, each at easy, medium and hard:
- `gamedev/logic/<mechanic>@<level>` (`grid`, `boxes`, `enemies`; `logic.py`): write the turn function
  `step(state, action)` of the grid game; graded by play-throughs against the engine (`gamedev_play`).
- `gamedev/level/<kind>@<level>` (`maze`, `coins`, `keys`; `levels.py`): write a level as text to a spec;
  graded host-side by the engine's solver (`gamedev_level`, no sandbox).
- `gamedev/physics/<task>@<level>` (`motion`, `launch`; `physics.py`): write a physics step or aim a
  projectile; graded by simulation (`gamedev_play`).
Every domain is an unbounded stream. Guarantees: tasks are deterministic in (seed, domain, index) (the
engine's PRNG is seeded from `task_rng`); every task's `answer` scores 1.0. Not here: the engine and the
grading (`posttrain.verify.gamedev`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import task_id, task_rng
from posttrain.tasks.families.gamedev.levels import level_task
from posttrain.tasks.families.gamedev.logic import logic_task
from posttrain.tasks.families.gamedev.physics import launch_task, motion_task
from posttrain.types import LEVEL_DIFFICULTY, DomainSpec, Level, Task
from posttrain.verify.configs import GameLevelConfig, GamePlayConfig, VerifierConfig
from posttrain.verify.gamedev.script import Rng

GameFamilyName = Literal["logic", "level", "physics"]
Maker = Callable[[str, str, Rng], tuple[str, dict[str, Any], str]]
"""(domain name, level, rng) -> (prompt, gold, answer)."""
MAKERS: dict[str, dict[str, Maker]] = {
    "logic": {name: logic_task for name in ("grid", "boxes", "enemies")},
    "level": {name: level_task for name in ("maze", "coins", "keys")},
    "physics": {"motion": lambda _name, level, rng: motion_task(level, rng),
                "launch": lambda _name, level, rng: launch_task(level, rng)},
}
"""Family -> domain name -> task maker."""
VERIFIERS: dict[str, Callable[[], VerifierConfig]] = {
    "logic": GamePlayConfig, "level": GameLevelConfig, "physics": GamePlayConfig,
}
DESCRIPTIONS = {"logic": "implement the grid game's turn function", "level": "design a level to a spec",
                "physics": "write game physics code"}  # fmt: skip
_ALL_FAMILIES: tuple[GameFamilyName, ...] = get_args(GameFamilyName)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)


class GameDevConfig(StrictModel):
    kind: Literal["gamedev"] = "gamedev"
    """Game-development domains on the in-house engine: game logic, level design, physics (opt-in)."""
    families: list[GameFamilyName] = Field(default_factory=lambda: list(_ALL_FAMILIES))
    """Which families become domains (`gamedev/<family>/<name>@<level>`)."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which levels become domains."""


class GameDevFamily:
    """Generates gamedev tasks from the engine's PRNG seeded per (seed, domain, index)."""

    def __init__(self, config: GameDevConfig) -> None:
        self.config = config
        self._domains = [
            DomainSpec(id=f"gamedev/{family}/{name}@{level}", family_kind="gamedev", source="builtin",
                       verifier=VERIFIERS[family]().kind, difficulty=LEVEL_DIFFICULTY[level],
                       description=f"gamedev: {DESCRIPTIONS[family]} ({name}, {level})")  # fmt: skip
            for family in config.families
            for name in MAKERS[family]
            for level in config.levels
        ]

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        path = domain.path
        rng = Rng(task_rng(seed, domain.id, index).getrandbits(64))
        prompt, gold, answer = MAKERS[path.family][path.domain](path.domain, path.level or "medium", rng)
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=prompt, gold=gold, answer=answer,
                    difficulty=domain.difficulty)  # fmt: skip

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return VERIFIERS[domain.path.family]()
