"""A small reference `ToolEnv`: a per-episode key-value store behind four tools, with failure injection.

Each task starts the store with a few keys and asks, over two user turns, to store a value, report another
key's value, then delete a key. `kv_env(failure_rate)` makes every tool call fail with a transient error
with that probability (a seeded RNG per episode: the same task replays the same failures), so recovery
— hitting an error and still succeeding — can be learned and counted. `kv_gold_policy` is the scripted
reference policy (it retries a failed call) and scores 1.

Guarantees: the store lives in the episode's tool set only; the grade is deterministic given the
transcript. Not here: a registered domain (procedural tool families live in `posttrain/tasks/`).
"""

from __future__ import annotations

import random
from typing import Any

from posttrain.envs.base import EpisodeLimits, Message, Policy, ToolEnv, retrying_policy
from posttrain.envs.tools import Tool, ToolSet
from posttrain.types import Score, Task
from posttrain.verify.tool_calls import content_without_calls, format_tool_call

TRANSIENT = "the store is temporarily unavailable, try again"
_WORDS = ("red", "blue", "green", "amber", "violet", "teal", "ochre", "white", "black", "silver")
_KEYS = ("color", "size", "owner", "city", "pet", "fruit", "tool", "river")


class TransientError(RuntimeError):
    """An injected failure: the same call succeeds when retried (with probability 1 - rate)."""


class KVStore:
    """The simulated API: a dict, and the episode's failure RNG."""

    def __init__(self, initial: dict[str, str], failure_rate: float = 0.0, seed: str = "",
                 goal: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.data = dict(initial)
        self.goal = goal or {}
        """The task's gold (what the grader checks)."""
        self.failure_rate = failure_rate
        self.failures = 0
        self._rng = random.Random(seed)

    def maybe_fail(self) -> None:
        if self.failure_rate > 0 and self._rng.random() < self.failure_rate:
            self.failures += 1
            raise TransientError(TRANSIENT)


def kv_tools(store: KVStore) -> ToolSet:
    """The four tools over `store` (closures: each tool set sees only its own store)."""

    def get(key: str) -> str:
        """Read the value stored under a key.

        Args:
            key: The key to read.
        """
        store.maybe_fail()
        if key not in store.data:
            raise KeyError(f"no key {key!r}")
        return store.data[key]

    def set(key: str, value: str) -> str:
        """Store a value under a key, replacing any previous value.

        Args:
            key: The key to write.
            value: The value to store.
        """
        store.maybe_fail()
        store.data[key] = value
        return "ok"

    def delete(key: str) -> str:
        """Delete a key and its value.

        Args:
            key: The key to delete.
        """
        store.maybe_fail()
        if store.data.pop(key, None) is None:
            raise KeyError(f"no key {key!r}")
        return "ok"

    def list_keys() -> list[str]:
        """List every key in the store, sorted."""
        store.maybe_fail()
        return sorted(store.data)

    return ToolSet([Tool.from_function(fn) for fn in (get, set, delete, list_keys)], state=store)


def make_kv_task(index: int) -> Task:
    """Task `index`: set one key, report another's value, then (second user turn) delete a third."""
    rng = random.Random(index)
    keys = rng.sample(_KEYS, 4)
    initial = {key: rng.choice(_WORDS) for key in keys[1:]}
    new_key, ask_key, drop_key = keys[0], keys[1], keys[2]
    value = rng.choice(_WORDS)
    gold = {"initial": initial, "set": {new_key: value}, "ask": ask_key, "answer": initial[ask_key],
            "delete": drop_key}  # fmt: skip
    prompt = (f"Store the value '{value}' under the key '{new_key}' in the key-value store, then tell me "
              f"the value stored under '{ask_key}'.")  # fmt: skip
    return Task(id=f"agent/example/kv#{index}", domain_id="agent/example/kv", prompt=prompt, gold=gold,
                metadata={"user_turns": [f"Thanks. Now delete the key '{drop_key}'."]})  # fmt: skip


def grade_kv(store: KVStore, transcript: list[Message]) -> Score:
    """Three sub-goals: the value stored, the asked value reported in a reply, the key deleted."""
    gold = store.goal
    replies = [content_without_calls(m["content"]) for m in transcript if m["role"] == "assistant"]
    goals = {
        "stored": all(store.data.get(k) == v for k, v in gold["set"].items()),
        "reported": any(gold["answer"] in reply for reply in replies),
        "deleted": gold["delete"] not in store.data,
    }
    completion = sum(goals.values()) / len(goals)
    passed = completion == 1.0
    return Score(reward=completion, passed=passed, details={"completion": completion, **goals,
                                                              "injected_failures": store.failures})  # fmt: skip


def kv_env(failure_rate: float = 0.0, limits: EpisodeLimits = EpisodeLimits()) -> ToolEnv:
    """The key-value environment; each episode gets a new store seeded from the task id."""

    def make_tools(task: Task) -> ToolSet:
        return kv_tools(KVStore(task.gold["initial"], failure_rate, seed=task.id, goal=task.gold))

    return ToolEnv(make_tools, grade_kv, system="You manage a key-value store for the user.", limits=limits)


def kv_gold_turns(task: Task) -> list[str]:
    """The reference assistant messages when no call fails."""
    gold = task.gold
    ((key, value),) = gold["set"].items()
    return [format_tool_call("set", {"key": key, "value": value}),
            format_tool_call("get", {"key": gold["ask"]}),
            f"The value stored under '{gold['ask']}' is {gold['answer']}.",
            format_tool_call("delete", {"key": gold["delete"]}),
            "Done, the key is deleted."]  # fmt: skip


def kv_gold_policy(task: Task) -> Policy:
    """The reference policy: the gold messages in order, repeating a call that failed transiently."""
    return retrying_policy(kv_gold_turns(task), TRANSIENT)
