"""Shared machinery of the procedural tool-use families: the flaky simulated API, grading, the gold policy.

A family (`FamilySpec`) only generates a task — prompt, initial state (a flat dict), a plan of gold calls
and the expected answer — and writes its tools as plain functions over the state dict. Everything else
is here and identical across families:

- `Api`: one episode's simulated API: a deep copy of the task's initial state, and failure injection.
  Call number n (counting the calls that reach the API, from 0) fails with `TRANSIENT` when a hash of
  (task id, n) falls under `q = rate / (1 - rate)` *and* call n-1 did not fail. Failures never come
  twice in a row (a retry always succeeds), and the long-run share of failed calls is
  q / (1 + q) = rate, which is why `rate` is at most 0.5.
- `grade`: the sub-goals are every state key the gold plan changes (final value == expected value) and,
  when the task asks a question, the answer. The answer is read from the final assistant message only:
  its last non-empty line outside tool calls must be `Answer: <value>` with exactly the gold value
  (case, surrounding quotes, a trailing period and spacing ignored; numbers compared as numbers). A reply
  listing several candidates is therefore wrong. Changing any state key the task did not ask to change
  costs one sub-goal (so deleting everything never passes). reward = completion = share of sub-goals.
- `gold_turns`: the reference policy (the plan, one call per message, a transiently failed call
  repeated, then the final reply) run on a fresh environment; failures are a function of the task id,
  so the messages are fixed per task.

Not here: the families' content (one module each) and the registry glue (`__init__.py`).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posttrain.envs.base import EpisodeLimits, Message, Policy, ToolEnv, retrying_policy, run_policy
from posttrain.envs.tools import Tool, ToolSet, ToolsPrompt
from posttrain.types import Score, Task
from posttrain.verify.tool_calls import content_without_calls, format_tool_call

TRANSIENT = "service temporarily unavailable, retry"
"""The text of every injected failure (the tool message reads `Error: <tool> failed: TransientError: ...`)."""
ANSWER_FORMAT = "End with a line 'Answer: <value>'."
"""Appended to the prompt of every task that asks a question."""
DONE = "Done."
"""The gold final reply of a task that asks no question."""
_ANSWER_LINE = re.compile(r"answer\s*:\s*(.*)", re.IGNORECASE)
_MISSING = "<missing>"

State = dict[str, Any]
Plan = list[tuple[str, dict[str, Any]]]


class TransientError(RuntimeError):
    """An injected failure: the next call to the same API always succeeds."""


class ToolError(ValueError):
    """A real error caused by the call (unknown key, busy slot...): retrying the same call fails again."""


@dataclass(frozen=True)
class Generated:
    """One task's content as a family generates it."""

    prompt: str
    state: State
    plan: Plan
    """The gold calls, in order (tool name, arguments)."""
    answer: str | None = None
    """The value the final reply must state, or None when the task asks no question."""


@dataclass(frozen=True)
class FamilySpec:
    """A tool-use family: its name, system line, task generator and tools over the state dict."""

    name: str
    system: str
    generate: Callable[[random.Random, str], Generated]
    """(rng, level) -> the task's content."""
    tools: Callable[[State], list[Callable[..., Any]]]
    """The tool functions over one episode's state (type hints + Google docstrings give their schemas)."""


def fails_at(task_id: str, position: int, failure_rate: float) -> bool:
    """Whether call `position` of an episode of `task_id` draws a failure (before the no-repeat rule)."""
    if failure_rate <= 0:
        return False
    digest = hashlib.blake2b(f"{task_id}\x00{position}".encode(), digest_size=8).digest()
    draw = int.from_bytes(digest, "little") / 2**64
    return draw < failure_rate / (1 - failure_rate) if failure_rate < 0.5 else True


class Api:
    """One episode's simulated API: its state, the task's gold, and the failure counter."""

    def __init__(self, task_id: str, gold: dict[str, Any], failure_rate: float) -> None:
        self.task_id, self.gold, self.failure_rate = task_id, gold, failure_rate
        self.data: State = copy.deepcopy(gold["state"])
        self.num_calls = 0
        self.failures = 0
        self._failed_last = False

    def gate(self) -> None:
        """Count one call; raise `TransientError` when it is drawn to fail."""
        position, self.num_calls = self.num_calls, self.num_calls + 1
        if not self._failed_last and fails_at(self.task_id, position, self.failure_rate):
            self._failed_last, self.failures = True, self.failures + 1
            raise TransientError(TRANSIENT)
        self._failed_last = False


def _gated(api: Api, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(**arguments: Any) -> Any:
        api.gate()
        return fn(**arguments)

    return call


def tool_set(spec: FamilySpec, api: Api) -> ToolSet:
    """The family's tools over `api` (each episode gets its own `api`, so nothing is shared)."""
    return ToolSet([Tool.from_function(_gated(api, fn)) for fn in spec.tools(api.data)], state=api)


def expected_state(spec: FamilySpec, state: State, plan: Plan) -> State:
    """The state after running `plan` without failures (what the grader compares against)."""
    data = copy.deepcopy(state)
    tools = {fn.__name__: fn for fn in spec.tools(data)}
    for name, arguments in plan:
        tools[name](**arguments)
    return data


def normalize(value: str) -> str:
    """An answer value for comparison: lower case, single spaces, no surrounding quotes or final period."""
    text = " ".join(value.strip().lower().split())
    return text.rstrip(".").strip().strip("'\"`*").strip()


def _same_value(given: str, gold: str) -> bool:
    given, gold = normalize(given), normalize(gold)
    try:
        return abs(float(given) - float(gold)) <= 1e-9 * max(1.0, abs(float(gold)))
    except ValueError:
        return given == gold


def final_answer(transcript: list[Message]) -> str | None:
    """The value of the `Answer:` line ending the last assistant message, or None."""
    replies = [m["content"] for m in transcript if m["role"] == "assistant"]
    if not replies:
        return None
    lines = [line.strip().strip("*").strip() for line in content_without_calls(replies[-1]).splitlines()]
    lines = [line for line in lines if line]
    match = _ANSWER_LINE.fullmatch(lines[-1]) if lines else None
    return match.group(1) if match else None


def state_goals(initial: State, expected: State, final: State) -> tuple[dict[str, bool], bool]:
    """One goal per key the plan changes, and whether any other key was changed (collateral damage)."""
    keys = sorted(set(initial) | set(expected) | set(final))
    wanted = [k for k in keys if initial.get(k, _MISSING) != expected.get(k, _MISSING)]
    goals = {f"state:{k}": final.get(k, _MISSING) == expected.get(k, _MISSING) for k in wanted}
    collateral = any(final.get(k, _MISSING) != initial.get(k, _MISSING) for k in keys if k not in wanted)
    return goals, collateral


def grade(api: Api, transcript: list[Message]) -> Score:
    """Completion = share of sub-goals done (one fewer when unrequested state changed)."""
    gold = api.gold
    goals, collateral = state_goals(gold["state"], gold["expected"], api.data)
    if gold["answer"] is not None:
        given = final_answer(transcript)
        goals["answer"] = given is not None and _same_value(given, gold["answer"])
    done = max(0, sum(goals.values()) - int(collateral))
    completion = done / len(goals) if goals else 0.0
    details = {"completion": completion, "goals": goals, "collateral": collateral,
               "injected_failures": api.failures}  # fmt: skip
    return Score(reward=completion, passed=completion == 1.0, details=details)


def make_env(spec: FamilySpec, failure_rate: float, limits: EpisodeLimits, tools_prompt: ToolsPrompt = "hermes") -> ToolEnv:
    """A `ToolEnv` for one episode of `spec`: tools over a fresh `Api` per `reset`."""

    def make_tools(task: Task) -> ToolSet:
        return tool_set(spec, Api(task.id, task.gold, failure_rate))

    return ToolEnv(make_tools, grade, system=spec.system, limits=limits, tools_prompt=tools_prompt)


def plan_turns(gold: dict[str, Any]) -> list[str]:
    """The gold messages when nothing fails: one call per message, then the final reply."""
    calls = [format_tool_call(name, arguments) for name, arguments in gold["plan"]]
    final = DONE if gold["answer"] is None else f"Answer: {gold['answer']}"
    return [*calls, final]


def gold_policy(gold: dict[str, Any]) -> Policy:
    """The reference policy: the plan's messages in order, repeating a call that failed transiently."""
    return retrying_policy(plan_turns(gold), TRANSIENT)


def gold_turns(env: ToolEnv, task: Task) -> list[str]:
    """The assistant messages the reference policy sends on `task` (in a fresh episode of `env`)."""
    transcript, _score = run_policy(env, task, gold_policy(task.gold))
    return [m["content"] for m in transcript if m["role"] == "assistant"]


def gold_record(spec: FamilySpec, generated: Generated) -> dict[str, Any]:
    """The task's `gold`: initial and expected state, the plan and the answer (JSON-serialisable)."""
    plan = [[name, dict(arguments)] for name, arguments in generated.plan]
    return {"state": generated.state, "expected": expected_state(spec, generated.state, generated.plan),
            "plan": plan, "answer": generated.answer}  # fmt: skip
