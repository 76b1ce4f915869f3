"""Key-value family: reads, copies, swaps and deletes in a store (`agent/tools/kv@<level>`).

easy: report one key's value (1 call, 3 keys); medium: copy a key to a new key and report another
(get, set, get; 5 keys); hard: swap two keys and delete a third (get, get, set, set, delete; 7 keys).
The state is the store itself (key -> value).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from posttrain.tasks.families.tool_use.common import ANSWER_FORMAT, FamilySpec, Generated, State, ToolError

KEYS = ("city", "pet", "color", "fruit", "tool", "river", "owner", "size", "code", "song")
WORDS = ("red", "blue", "oak", "fig", "lime", "teal", "rome", "oslo", "cat", "owl", "saw", "jazz")
_NUM_KEYS = {"easy": 3, "medium": 5, "hard": 7}


def tools(state: State) -> list[Callable[..., Any]]:
    def get(key: str) -> str:
        """Read a key's value.

        Args:
            key: The key.
        """
        if key not in state:
            raise ToolError(f"no key {key!r}")
        return str(state[key])

    def set(key: str, value: str) -> str:
        """Store a value under a key.

        Args:
            key: The key.
            value: The value.
        """
        state[key] = value
        return "ok"

    def delete(key: str) -> str:
        """Delete a key.

        Args:
            key: The key.
        """
        if state.pop(key, None) is None:
            raise ToolError(f"no key {key!r}")
        return "ok"

    return [get, set, delete]


def generate(rng: random.Random, level: str) -> Generated:
    keys = rng.sample(KEYS, _NUM_KEYS[level] + 1)
    spare, keys = keys[0], keys[1:]
    values = rng.sample(WORDS, len(keys))
    state: State = dict(zip(keys, values, strict=True))
    a, b, c = keys[:3]
    if level == "easy":
        return Generated(f"What is stored under '{a}'? {ANSWER_FORMAT}", state, [("get", {"key": a})], state[a])
    if level == "medium":
        plan = [("get", {"key": a}), ("set", {"key": spare, "value": state[a]}), ("get", {"key": b})]
        prompt = f"Copy the value of '{a}' to a new key '{spare}', then tell me the value of '{b}'. {ANSWER_FORMAT}"
        return Generated(prompt, state, plan, state[b])
    plan = [("get", {"key": a}), ("get", {"key": b}), ("set", {"key": a, "value": state[b]}),
            ("set", {"key": b, "value": state[a]}), ("delete", {"key": c})]  # fmt: skip
    return Generated(f"Swap the values of '{a}' and '{b}', then delete '{c}'.", state, plan)


SPEC = FamilySpec("kv", "You manage a key-value store.", generate, tools)
