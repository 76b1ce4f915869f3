"""Every offline reasoning-gym generator as a domain family: `<class>/reasoning_gym/<dataset>@<level>`.

Classes: reasoning-gym's categories (its sub-packages) map to a handful of classes in `CLASS_OF_CATEGORY`.

Levels: for a dataset with a curriculum, each attribute is set to the level at the same fraction of its
range (easy = first, medium = middle, hard = last, within `LEVEL_FLOOR`/`LEVEL_CAP` where the
extreme levels are unusable) and turned into a config with upper-bound ranges, so levels do not overlap more
than the curriculum forces. Datasets without a curriculum (and curricula whose attributes have a single
level) reuse the same config across levels; their DomainSpec description says so.

Generation: one reasoning-gym dataset per (dataset, level, seed), created with `size` items and a seed
derived from (seed, domain id), cached per process; task `index` is the dataset's item `index`
(reasoning-gym items are generated on demand, nothing is materialised; the last 1024 items are kept).
`DomainSpec.size` is `size` (`SIZE_CAP` for generators that build every item up front). The verifier
rebuilds the same dataset as seed 0, so in-process scoring reuses the generator. Items are a pure
function of (seed, domain, index) within a process; across processes too, except for the datasets in
`HASH_SEED_DEPENDENT`, which need a fixed PYTHONHASHSEED.

Gold: `Task.gold` is the entry encoded by `posttrain.verify.gym.encode_entry` (JSON-safe, decoded back to
the generator's own types before scoring) and `Task.answer` is `<answer>...</answer>` around the entry's
answer - or, for the five generators that score validity instead of a stored answer, around a valid
solution taken from the entry's metadata (graph_color, propositional_logic, rubiks_cube) or computed by
`reasoning_gym_gold` (boxnet, rush_hour). Generators that fail offline or whose scorer cannot tell
garbage from an answer are left out, with the reason, in `EXCLUDED`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import task_id
from posttrain.tasks.families import reasoning_gym_gold as gold_solvers
from posttrain.types import LEVEL_DIFFICULTY, DomainSpec, Level, Task
from posttrain.verify.configs import ReasoningGymConfig, VerifierConfig
from posttrain.verify.gym import clear_dataset_cache, encode_entry, load_dataset

CLASS_OF_CATEGORY: dict[str, str] = {
    "algebra": "math",
    "arithmetic": "math",
    "geometry": "math",
    "probability": "math",
    "algorithmic": "algorithmic",
    "graphs": "algorithmic",
    "code": "coding",
    "games": "puzzles",
    "cognition": "reasoning",
    "induction": "reasoning",
    "logic": "reasoning",
    "arc": "reasoning",
}
"""reasoning-gym category (sub-package) -> taxonomy class."""

EXCLUDED: dict[str, str] = {
    "composite": "a mixture of other datasets, not a generator of its own (needs a dataset list)",
    "game_of_life_halting": "the scorer compares bool() of the strings, so any non-empty answer "
    "(garbage included) scores 1.0",
}
"""Datasets left out, with the reason (shown by the CLI)."""

HASH_SEED_DEPENDENT: dict[str, str] = {
    name: "items depend on Python's hash seed (set iteration order): the same index yields different "
    "tasks in processes with different PYTHONHASHSEED; fix it (e.g. PYTHONHASHSEED=0) for reproducible runs"
    for name in (
        "isomorphic_strings",
        "knight_swap",
        "polynomial_multiplication",
        "ransom_note",
        "word_ladder",
    )
}
"""Datasets kept but not reproducible across processes unless PYTHONHASHSEED is fixed (splits stay
leak-free: they are a function of content)."""

LEVEL_FRACTION: dict[str, float] = {"easy": 0.0, "medium": 0.5, "hard": 1.0}
"""Where in each curriculum attribute's range a named level sits."""

LEVEL_CAP: dict[str, dict[str, int]] = {
    # top curriculum levels generate in seconds per item or loop for minutes
    "bf": {"*": 1}, "futoshiki": {"*": 2}, "game_of_life": {"*": 2}, "jugs": {"*": 1}, "n_queens": {"*": 3},
    "puzzle24": {"*": 2}, "sokoban": {"*": 7}, "zebra_puzzles": {"*": 3},
    # top levels hang on some items (arc_1d: 1 in 80 at size 100; number_sequence: ~1 in 10)
    "arc_1d": {"*": 2}, "number_sequence": {"terms": 0, "*": 1},
    # top levels produce answers of ~20k characters (a 100x100 matrix), past the verifier's tail
    "binary_matrix": {"*": 2}, "rotate_matrix": {"*": 2}, "spiral_matrix": {"*": 2},
    # higher levels fail to generate ("Failed to generate valid expression", empty ranges, asserts)
    "countdown": {"*": 0}, "letter_jumble": {"*": 1}, "spell_backward": {"*": 2},
    "caesar_cipher": {"rotation": 1},
    # metadata holds a valid solution only for the 3x3 cube
    "rubiks_cube": {"cube_size": 0},
}
"""Highest curriculum level index per attribute ("*": every attribute) where the top levels are unusable."""

LEVEL_FLOOR: dict[str, int] = {"sokoban": 1}
"""Lowest curriculum level index where level 0 is unusable (sokoban: 6x6 boards never finish generating)."""

DEFAULT_CONFIG_ONLY: dict[str, str] = {
    "knight_swap": "every curriculum level fails to generate; the default config is used at every level",
}
"""Datasets whose curriculum is unusable: the default config at every level, with the reason."""

SIZE_CAP: dict[str, int] = {"acre": 500}
"""Datasets that build all their items up front: their size is capped to keep creation fast."""

ANSWER_INSTRUCTION = "Give your final answer inside <answer></answer> tags."

_RESERVED_PARAMS = ("seed", "size")


def _all_levels() -> list[Level]:
    return ["easy", "medium", "hard"]


class ReasoningGymFamilyConfig(StrictModel):
    kind: Literal["reasoning_gym"] = "reasoning_gym"
    """reasoning-gym generators, one domain per (dataset, level)."""
    datasets: list[str] | Literal["all"] = "all"
    """Dataset names, or every registered dataset not in EXCLUDED."""
    levels: list[Level] = Field(default_factory=lambda: _all_levels())
    """Difficulty levels to expose."""
    size: int = Field(10_000, ge=1)
    """Distinct task indices per domain (the reasoning-gym dataset size)."""
    instruction: str = ANSWER_INSTRUCTION
    """Line appended to every question ("" for none)."""
    partial_credit: bool = False
    """Reward the scorer's raw value instead of pass/fail (see ReasoningGymConfig)."""


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How one domain is generated."""

    dataset: str
    level: str
    params: dict[str, Any]


def _json_safe(value: Any) -> Any:
    """`value` with tuples/sets as lists, non-string keys as strings and unknown objects as str."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_safe(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_safe({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, enum.Enum):
        return _json_safe(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    tolist = getattr(value, "tolist", None)
    return _json_safe(tolist()) if callable(tolist) else str(value)


@functools.lru_cache(maxsize=1024)
def _entry(dataset: str, params_json: str, index: int) -> dict[str, Any]:
    """Item `index` of a cached dataset; recently generated items are kept because some generators
    take a second per item and callers (validation, the pool) often ask for the same task twice."""
    return dict(load_dataset(dataset, json.loads(params_json))[index])


def clear_caches() -> None:
    """Forget generated items and datasets (tests of determinism)."""
    _entry.cache_clear()
    clear_dataset_cache()


def derive_seed(seed: int, domain_id: str) -> int:
    """The reasoning-gym dataset seed of a domain under a run seed (32 bits, stable across runs)."""
    digest = hashlib.blake2b(f"{seed}\x00{domain_id}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


def category_of(dataset: str) -> str:
    """reasoning-gym's category of a dataset (its sub-package)."""
    from reasoning_gym.factory import DATASETS

    return DATASETS[dataset][0].__module__.split(".")[1]


def available_datasets() -> list[str]:
    """Every registered reasoning-gym dataset that is not excluded, sorted."""
    from reasoning_gym.factory import DATASETS

    return sorted(name for name in DATASETS if name not in EXCLUDED)


def level_params(dataset: str, level: str) -> tuple[dict[str, Any], str]:
    """(JSON-safe config kwargs without seed/size, note) for `dataset` at `level`."""
    from reasoning_gym.coaching.base_curriculum import DefaultCurriculumContext, RangeAttributeMode
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if dataset in DEFAULT_CONFIG_ONLY:
        return {}, DEFAULT_CONFIG_ONLY[dataset]
    if not has_curriculum(dataset):
        return {}, "no curriculum: default config at every level"
    curriculum = create_curriculum(dataset)
    caps = LEVEL_CAP.get(dataset, {})
    for name, attr in curriculum.attributes.items():
        top = min(caps.get(name, caps.get("*", len(attr.levels) - 1)), len(attr.levels) - 1)
        floor = min(LEVEL_FLOOR.get(dataset, 0), top)
        curriculum.set_attr_level(name, floor + int(LEVEL_FRACTION[level] * (top - floor) + 0.5))
    context = DefaultCurriculumContext(mode=RangeAttributeMode.UPPER_BOUND)
    config = curriculum.generate_configuration(context=context)
    fields = dataclasses.fields(config)
    params = {f.name: getattr(config, f.name) for f in fields if f.name not in _RESERVED_PARAMS}
    single = all(len(attr.levels) == 1 for attr in curriculum.attributes.values())
    return _json_safe(params), "curriculum has one level: same config at every level" if single else ""


class ReasoningGymFamily:
    """Domains for reasoning-gym datasets x levels; tasks are dataset items by index."""

    def __init__(self, config: ReasoningGymFamilyConfig) -> None:
        self.config = config
        self._plans: dict[str, _Plan] | None = None
        self._specs: list[DomainSpec] = []
        self._lock = threading.Lock()

    def domains(self) -> Sequence[DomainSpec]:
        self._ensure_plans()
        return list(self._specs)

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        plan = self._plan(domain)
        size = self._size(plan.dataset)
        if not 0 <= index < size:
            raise IndexError(f"{domain.id}: index {index} outside [0, {size})")
        entry = _entry(plan.dataset, json.dumps(self._dataset_params(plan, domain.id, seed)), index)
        question = str(entry["question"])
        prompt = f"{question}\n\n{self.config.instruction}" if self.config.instruction else question
        return Task(
            id=task_id(domain.id, index),
            domain_id=domain.id,
            prompt=prompt,
            gold=encode_entry(entry),
            answer=f"<answer>{gold_answer(plan.dataset, entry)}</answer>",
            difficulty=domain.difficulty,
            metadata={"dataset": plan.dataset, "level": plan.level},
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        plan = self._plan(domain)
        return ReasoningGymConfig(
            dataset=plan.dataset,
            params=self._dataset_params(plan, domain.id, 0),
            partial_credit=self.config.partial_credit,
        )

    def _dataset_params(self, plan: _Plan, domain_id: str, seed: int) -> dict[str, Any]:
        return {**plan.params, "seed": derive_seed(seed, domain_id), "size": self._size(plan.dataset)}

    def _size(self, dataset: str) -> int:
        return min(self.config.size, SIZE_CAP.get(dataset, self.config.size))

    def _plan(self, domain: DomainSpec) -> _Plan:
        plans = self._ensure_plans()
        if domain.id not in plans:
            raise KeyError(f"{domain.id} is not a reasoning-gym domain of this family")
        return plans[domain.id]

    def _ensure_plans(self) -> dict[str, _Plan]:
        with self._lock:
            if self._plans is None:
                self._plans, self._specs = self._build_plans()
            return self._plans

    def _build_plans(self) -> tuple[dict[str, _Plan], list[DomainSpec]]:
        names = self._dataset_names()
        plans: dict[str, _Plan] = {}
        specs: list[DomainSpec] = []
        for name in names:
            cls = CLASS_OF_CATEGORY.get(category_of(name), "reasoning")
            previous: dict[str, Any] | None = None
            for level in self.config.levels:
                params, note = level_params(name, level)
                if not note and params == previous:
                    note = "same config as the level below (the curriculum cannot separate them)"
                previous = params
                domain_id = f"{cls}/reasoning_gym/{name}@{level}"
                plans[domain_id] = _Plan(name, level, params)
                specs.append(self._spec(domain_id, name, level, note))
        return plans, specs

    def _spec(self, domain_id: str, name: str, level: str, note: str) -> DomainSpec:
        description = f"reasoning-gym {name} ({category_of(name)}), {level}"
        if name in HASH_SEED_DEPENDENT:
            note = "; ".join(filter(None, [note, "depends on PYTHONHASHSEED"]))
        return DomainSpec(
            id=domain_id,
            family_kind="reasoning_gym",
            source="reasoning_gym",
            verifier="reasoning_gym",
            difficulty=LEVEL_DIFFICULTY[level],
            size=self._size(name),
            description=f"{description}; {note}" if note else description,
        )

    def _dataset_names(self) -> list[str]:
        available = available_datasets()
        if self.config.datasets == "all":
            return available
        unknown = [name for name in self.config.datasets if name not in available]
        if unknown:
            reasons = [f"{n} ({EXCLUDED.get(n, 'not a reasoning-gym dataset')})" for n in unknown]
            raise ValueError(f"reasoning_gym.datasets: unavailable: {', '.join(reasons)}")
        return list(dict.fromkeys(self.config.datasets))


_GOLD_ANSWERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "graph_color": lambda entry: json.dumps(
        {str(k): v for k, v in entry["metadata"]["possible_answer"].items()}
    ),
    "propositional_logic": lambda entry: str(entry["metadata"]["example_answer"]),
    "rubiks_cube": lambda entry: str(entry["metadata"]["example_correct_answer"]),
    "rush_hour": gold_solvers.rush_hour_solution,
    "boxnet": gold_solvers.boxnet_plan,
}
"""Gold answers for the generators that score validity and store no answer."""


def gold_answer(dataset: str, entry: dict[str, Any]) -> str:
    """The text of a gold answer for `entry` (the stored answer unless the dataset needs a solver)."""
    solver = _GOLD_ANSWERS.get(dataset)
    return solver(entry) if solver is not None else str(entry["answer"])
