"""The environment contract: one stateful episode between a policy and a task, and two implementations.

`Environment` is the protocol every domain reaches the trainer through: `reset(task)` gives the opening
messages and the tool schemas, `step(assistant_message)` gives the messages that follow it and whether the
episode is done, `end(reason)` stops it from outside (the policy ran out of turns or tokens), and
`grade()` gives the usual `Score` with per-episode metrics in `details` (`EPISODE_METRICS`).
`ToolEnv` is the generic multi-turn tool loop; `SingleTurnEnv` adapts a single-turn domain (one step,
done). `run_policy` / `run_scripted` drive an environment with a function of the transcript / a fixed
list of assistant messages (gold validation, `posttrain score`).

Guarantees: `step` is total on any string (garbage, 1 MB, invalid surrogates, endless tool calls); every
`EpisodeLimits` bound ends the episode cleanly with its reason; a `ToolEnv` builds its tool set per
episode, so neither successive nor concurrent episodes share simulated-API state (one instance runs one
episode at a time; `fresh()` gives another instance for a concurrent one); a grader that raises gives
an infrastructure-failure `Score`, never an exception.

Not here: tokens, engines and the asyncio runner (they drive this contract), sandboxing (tools that need
it call `posttrain.sandbox`), procedural task families (`posttrain/tasks/`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from posttrain.envs.tools import ToolOutcome, ToolSet, ToolsPrompt, clean_text, exception_text, render_tools
from posttrain.types import Score, Task
from posttrain.verify.tool_calls import parse_tool_calls

Message = dict[str, str]
EPISODE_METRICS = ("turns", "tool_calls", "tool_calls_ok", "tool_errors", "malformed_calls", "recovered",
                   "end_reason")  # fmt: skip
"""Keys every environment's grade puts in `Score.details`."""

COMPLETED, OUT_OF_TURNS = "completed", "policy_out_of_turns"
MAX_TURNS, MAX_TOOL_CALLS, MAX_LENGTH = "max_turns", "max_tool_calls", "max_length"


@dataclass(frozen=True)
class Observation:
    """What the policy sees first: the opening messages and the tools' JSON schemas."""

    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class StepResult:
    """What follows one assistant message: new messages (tool results, the next user turn; the one that
    crossed `max_length` included), and whether the episode is over and why (`end_reason` is None while
    it goes on)."""

    messages: list[Message]
    done: bool
    end_reason: str | None = None


@runtime_checkable
class Environment(Protocol):
    """One episode at a time: reset, step until done (or `end`), grade."""

    def reset(self, task: Task) -> Observation:
        """Start an episode on `task` (forgetting any previous one)."""
        ...

    def step(self, assistant_message: str) -> StepResult:
        """Take the policy's next message; after the episode is done, returns done again and changes nothing."""
        ...

    def end(self, reason: str) -> None:
        """End the episode from outside (no-op when it is already done)."""
        ...

    def grade(self) -> Score:
        """The episode's score with `EPISODE_METRICS` in its details."""
        ...


@dataclass(frozen=True)
class EpisodeLimits:
    """Bounds on one episode; reaching any ends it with the bound's name as the reason."""

    max_turns: int = 16
    """Assistant messages per episode."""
    max_tool_calls: int = 64
    """Tool calls per episode, malformed ones included; calls past it in a message are not run."""
    max_length: int = 200_000
    """Total length of the transcript, in characters, or in tokens when `count_tokens` is given."""
    tool_timeout_s: float = 10.0
    """Per-call timeout for tools that do not set their own."""
    count_tokens: Callable[[str], int] | None = None
    """Measures `max_length` in tokens instead of characters."""

    def length(self, text: str) -> int:
        return self.count_tokens(text) if self.count_tokens is not None else len(text)


@dataclass
class EpisodeStats:
    """Running counters of one episode (the metrics part of its grade)."""

    turns: int = 0
    tool_calls: int = 0
    tool_calls_ok: int = 0
    tool_errors: int = 0
    malformed_calls: int = 0
    length: int = 0
    end_reason: str | None = None

    def count(self, outcome: ToolOutcome) -> None:
        self.tool_calls += 1
        self.tool_calls_ok += outcome.ok
        self.tool_errors += not outcome.ok
        self.malformed_calls += outcome.status.is_malformed

    def details(self, passed: bool) -> dict[str, Any]:
        """The `EPISODE_METRICS`; `recovered` is whether the episode hit an error and still passed."""
        return {"turns": self.turns, "tool_calls": self.tool_calls, "tool_calls_ok": self.tool_calls_ok,
                "tool_errors": self.tool_errors, "malformed_calls": self.malformed_calls,
                "recovered": bool(self.tool_errors and passed), "end_reason": self.end_reason}  # fmt: skip


def with_metrics(score: Score, stats: EpisodeStats) -> Score:
    """`score` with the episode metrics added to its details (the grader's own keys win)."""
    return score.model_copy(update={"details": {**stats.details(score.passed), **score.details}})


def prompt_messages(task: Task) -> list[Message]:
    """The task's prompt as chat message dicts."""
    if isinstance(task.prompt, str):
        return [{"role": "user", "content": task.prompt}]
    return [{"role": m.role, "content": m.content} for m in task.prompt]


def user_turns_of(task: Task) -> list[str]:
    """Default user turns: the prompt's user messages, then `task.metadata["user_turns"]` if any."""
    turns = [m["content"] for m in prompt_messages(task) if m["role"] == "user"]
    return turns + [str(turn) for turn in task.metadata.get("user_turns", [])]


Grader = Callable[[Any, list[Message]], Score]
"""`grader(tool_set.state, transcript) -> Score`."""


class TurnLoop:
    """The turn bookkeeping every multi-turn environment shares: `step` counts the turn, hands the cleaned
    assistant text to `_respond`, and ends the episode at `limits.max_turns`; `end` keeps the first reason.
    Subclasses set `_task` (in `reset`), `stats` and `limits`, and implement `_respond`."""

    _task: Task | None
    stats: EpisodeStats
    limits: EpisodeLimits

    @property
    def done(self) -> bool:
        return self.stats.end_reason is not None

    def end(self, reason: str) -> None:
        if not self.done:
            self.stats.end_reason = reason

    def step(self, assistant_message: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("step() before reset()")
        if self.done:
            return StepResult([], True, self.stats.end_reason)
        text = clean_text(assistant_message)
        self.stats.turns += 1
        new = self._respond(text)
        if not self.done and self.stats.turns >= self.limits.max_turns:
            self.end(MAX_TURNS)
        return StepResult(new, self.done, self.stats.end_reason)

    def _respond(self, text: str) -> list[Message]:
        """The environment's reply to one assistant message (may call `end`)."""
        raise NotImplementedError


class ToolEnv(TurnLoop):
    """A multi-turn tool episode: user turns fed in order, tool calls run, graded on state and transcript.

    An assistant message with tool calls gets one `role: tool` message per call (in order); one without
    ends the current user turn, and the next user turn follows or, when none is left, the episode ends.
    """

    def __init__(self, make_tools: Callable[[Task], ToolSet], grader: Grader,
                 user_turns: Callable[[Task], Sequence[str]] = user_turns_of, system: str | None = None,
                 limits: EpisodeLimits = EpisodeLimits(), tools_prompt: ToolsPrompt = "hermes") -> None:  # fmt: skip
        self.make_tools, self.grader, self.user_turns, self.system, self.limits = (
            make_tools, grader, user_turns, system, limits)
        self.tools_prompt: ToolsPrompt = tools_prompt
        self._task: Task | None = None
        self._tools = ToolSet([])
        self._pending: list[str] = []
        self.transcript: list[Message] = []
        self.stats = EpisodeStats()

    def fresh(self) -> ToolEnv:
        """Another environment with the same definition, for a concurrent episode."""
        return ToolEnv(self.make_tools, self.grader, self.user_turns, self.system, self.limits, self.tools_prompt)

    def reset(self, task: Task) -> Observation:
        self._task, self.stats = task, EpisodeStats()
        self._tools = self.make_tools(task)
        self._tools.timeout_s = self.limits.tool_timeout_s
        turns = list(self.user_turns(task))
        if not turns:
            raise ValueError(f"task {task.id!r} has no user turn")
        self._pending = turns[1:]
        base = "\n\n".join(m["content"] for m in prompt_messages(task) if m["role"] == "system") or self.system
        system = render_tools(self.tools_prompt, self._tools, base) if self._tools.tools else (base or "")
        self.transcript = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": turns[0]}]
        self.stats.length = sum(self.limits.length(m["content"]) for m in self.transcript)
        return Observation([dict(m) for m in self.transcript], self._tools.schemas)

    def _respond(self, text: str) -> list[Message]:
        if self._append({"role": "assistant", "content": text}):
            return []
        calls = parse_tool_calls(text)
        if not calls:
            if not self._pending:
                self.end(COMPLETED)
                return []
            message = {"role": "user", "content": self._pending.pop(0)}
            self._append(message)
            return [message]
        new: list[Message] = []
        for call in calls:
            if self.stats.tool_calls >= self.limits.max_tool_calls:
                self.end(MAX_TOOL_CALLS)
                break
            outcome = self._tools.run(call)
            self.stats.count(outcome)
            new.append(outcome.message)
            if self._append(outcome.message):
                break
        if not self.done and self.stats.tool_calls >= self.limits.max_tool_calls:
            self.end(MAX_TOOL_CALLS)
        return new

    def _append(self, message: Message) -> bool:
        """Add `message` to the transcript; True (and the episode ends) when it passes `max_length`."""
        self.transcript.append(message)
        self.stats.length += self.limits.length(message["content"])
        if self.stats.length > self.limits.max_length:
            self.end(MAX_LENGTH)
        return self.done

    def grade(self) -> Score:
        try:
            score = self.grader(self._tools.state, [dict(m) for m in self.transcript])
        except Exception as exc:  # a grader bug is the environment's failure, not the policy's
            score = Score.infra(f"grader failed: {exception_text(exc)}")
        return with_metrics(score, self.stats)


class SingleTurnEnv:
    """A single-turn domain as an environment: the prompt, one assistant message, done, graded by
    `grade(task, response)`."""

    def __init__(self, grade: Callable[[Task, str], Score]) -> None:
        self._grade = grade
        self._task: Task | None = None
        self._response: str | None = None
        self.stats = EpisodeStats()

    def fresh(self) -> SingleTurnEnv:
        return SingleTurnEnv(self._grade)

    def reset(self, task: Task) -> Observation:
        self._task, self._response, self.stats = task, None, EpisodeStats()
        return Observation(prompt_messages(task))

    def step(self, assistant_message: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("step() before reset()")
        if self.stats.end_reason is None:
            self._response, self.stats.turns = assistant_message, 1
            self.stats.end_reason = COMPLETED
        return StepResult([], True, self.stats.end_reason)

    def end(self, reason: str) -> None:
        if self.stats.end_reason is None:
            self.stats.end_reason = reason

    def grade(self) -> Score:
        if self._task is None:
            raise RuntimeError("grade() before reset()")
        try:
            score = self._grade(self._task, self._response or "")
        except Exception as exc:
            score = Score.infra(f"grader failed: {exception_text(exc)}")
        return with_metrics(score, self.stats)


Policy = Callable[[list[Message]], str | None]
"""Next assistant message from the transcript so far, or None when the policy has nothing more to say."""


def retrying_policy(steps: Sequence[str], transient: str) -> Policy:
    """A scripted policy: `steps` in order, repeating the last one when its tool result contains `transient`
    (a transient failure); None when the steps run out (the reference policy of the tool families)."""
    position = 0

    def policy(transcript: list[Message]) -> str | None:
        nonlocal position
        last = transcript[-1]
        if last["role"] == "tool" and transient in last["content"] and position > 0:
            return steps[position - 1]
        if position == len(steps):
            return None
        position += 1
        return steps[position - 1]

    return policy


def run_policy(env: Environment, task: Task, policy: Policy) -> tuple[list[Message], Score]:
    """One episode: the transcript (opening messages, each assistant message and what followed) and the
    grade. A policy returning None ends the episode with `policy_out_of_turns`."""
    transcript = list(env.reset(task).messages)
    while True:
        message = policy(transcript)
        if message is None:
            env.end(OUT_OF_TURNS)
            break
        result = env.step(message)
        transcript += [{"role": "assistant", "content": clean_text(message)}, *result.messages]
        if result.done:
            break
    return transcript, env.grade()


def run_scripted(env: Environment, task: Task, turns: Sequence[str]) -> tuple[list[Message], Score]:
    """Drive `env` with fixed assistant messages in order; running out ends the episode
    (`policy_out_of_turns`)."""
    queue = list(turns)
    return run_policy(env, task, lambda _transcript: queue.pop(0) if queue else None)

