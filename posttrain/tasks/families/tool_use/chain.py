"""Multi-hop lookup family: each call needs the previous call's result (`agent/tools/chain@<level>`).

A small staff directory with random ids: `find(name)` gives a person's id and `info(id, field)` a field,
where `manager` is another id. easy: a person's phone (find, info); medium: the city of their manager
(find, info, info); hard: the phone of their manager's manager (find, info, info, info). The directory
has 4 / 6 / 8 people. Read-only: only the answer is graded.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Literal

from posttrain.tasks.families.tool_use.common import ANSWER_FORMAT, FamilySpec, Generated, State, ToolError

NAMES = ("Ada", "Bo", "Cy", "Di", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kit", "Lu")
CITIES = ("Oslo", "Lima", "Rome", "Kyiv", "Baku", "Doha", "Riga", "Bern")
_SIZE = {"easy": 4, "medium": 6, "hard": 8}
_HOPS = {"easy": 0, "medium": 1, "hard": 2}


def tools(state: State) -> list[Callable[..., Any]]:
    def find(name: str) -> str:
        """Find a person's id by name.

        Args:
            name: The person's name.
        """
        for person_id, person in state.items():
            if person["name"].lower() == name.strip().lower():
                return str(person_id)
        raise ToolError(f"no person named {name!r}")

    def info(id: str, field: Literal["manager", "city", "phone"]) -> str:
        """Get a field of a person; manager is an id.

        Args:
            id: The person's id.
            field: Which field.
        """
        if id not in state:
            raise ToolError(f"no id {id!r}")
        return str(state[id][field])

    return [find, info]


def generate(rng: random.Random, level: str) -> Generated:
    size, hops = _SIZE[level], _HOPS[level]
    names = rng.sample(NAMES, size)
    ids = [f"p{n}" for n in rng.sample(range(10, 100), size)]
    phones = [f"555-{n:04d}" for n in rng.sample(range(10_000), size)]
    state: State = {
        person_id: {"name": name, "manager": rng.choice([i for i in ids if i != person_id]),
                    "city": rng.choice(CITIES), "phone": phone}
        for person_id, name, phone in zip(ids, names, phones, strict=True)
    }  # fmt: skip
    start = ids[0]
    plan: list[tuple[str, dict[str, Any]]] = [("find", {"name": names[0]})]
    current = start
    for _ in range(hops):
        plan.append(("info", {"id": current, "field": "manager"}))
        current = state[current]["manager"]
    field = "city" if level == "medium" else "phone"
    plan.append(("info", {"id": current, "field": field}))
    whose = names[0] + "'s" + " manager's" * hops
    return Generated(f"What is {whose} {field}? {ANSWER_FORMAT}", state, plan, str(state[current][field]))


SPEC = FamilySpec("chain", "Look people up in the staff directory.", generate, tools)
