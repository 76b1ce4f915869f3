"""Tools: plain Python callables with JSON schemas, checked and run for an episode, results as messages.

A `Tool` is a callable plus its "function" schema (derived by `schema.function_schema` or given). A
`ToolSet` is the tools of one episode (built per episode, so a simulated API's state — held in
`ToolSet.state` and closed over by its tools — is never shared): it checks a parsed call against the
schema, runs it with a timeout in a worker thread, and turns the outcome into a `role: tool` message and
a `ToolOutcome` record for metrics. `render_tools_system_prompt` describes the tools to the model the way
the Hermes/Qwen2.5 chat templates do.

Guarantees: `ToolSet.run` is total — a malformed call, an unknown tool, bad arguments, a tool that
raises (any `Exception`), hangs past its timeout or returns 100 MB gives an error or a capped message and
never propagates. Message content is valid UTF-8 (lone surrogates replaced) and at most
`max_result_chars` long plus a short note saying how much was cut.

Not here: isolation. Tools run in this process; a hung worker thread cannot be killed and is abandoned
(daemon thread; it may still touch its episode's state, which nothing reads after the episode ends).
Tools that run untrusted code or touch files must go through `posttrain.sandbox` (the tool body calls
it); text a tool prints to stdout is not captured — tools return their results.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from posttrain.envs.schema import argument_error, function_schema
from posttrain.verify.tool_calls import MalformedCall, ToolCall

MAX_RESULT_CHARS = 8192
"""Default cap on one tool message's content (head and tail kept)."""
DEFAULT_TIMEOUT_S = 10.0
"""Default per-call timeout."""
ERROR_NAME = "tool_call_error"
"""`name` of the tool message answering a call that could not be read."""


@dataclass(frozen=True)
class Tool:
    """A callable the model may call by name, with its "function" JSON schema."""

    fn: Callable[..., Any]
    schema: dict[str, Any]
    timeout_s: float | None = None
    """Overrides the tool set's timeout for this tool."""

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None, description: str | None = None,
                      timeout_s: float | None = None) -> Tool:  # fmt: skip
        """A tool whose schema is derived from `fn`'s type hints and docstring."""
        return cls(fn, function_schema(fn, name, description), timeout_s)

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.schema["function"].get("parameters") or {"type": "object", "properties": {}})


class ToolStatus(StrEnum):
    """How one call ended."""

    OK = "ok"
    MALFORMED = "malformed"
    """The `<tool_call>` block could not be read as a call."""
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    """Missing, unexpected or mistyped arguments, or a value outside an enum."""
    RAISED = "raised"
    TIMEOUT = "timeout"

    @property
    def is_malformed(self) -> bool:
        """The model wrote a call that does not fit the tools (as opposed to the tool failing)."""
        return self in (ToolStatus.MALFORMED, ToolStatus.UNKNOWN_TOOL, ToolStatus.INVALID_ARGUMENTS)


@dataclass(frozen=True)
class ToolOutcome:
    """One call's result: the `role: tool` message to append and what happened, for metrics."""

    message: dict[str, str]
    status: ToolStatus
    name: str = ""

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.OK


def clean_text(text: str) -> str:
    """`text` as valid UTF-8 (lone surrogates become '?')."""
    return text.encode("utf-8", "replace").decode("utf-8")


def cap_text(text: str, max_chars: int = MAX_RESULT_CHARS) -> str:
    """`text` cut to its head and tail when longer than `max_chars`, saying how many characters were cut."""
    if len(text) <= max_chars:
        return text
    head, tail = text[: max_chars // 2], text[len(text) - max_chars // 2 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} of {len(text)} characters cut ...]\n{tail}"


def result_text(value: Any, max_chars: int = MAX_RESULT_CHARS) -> str:
    """A tool's return value as message text: a str as is, anything else as JSON (repr if not JSON)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except Exception:  # not JSON (cycles, a hostile __str__): its repr
            text = _safe_repr(value)
    return clean_text(cap_text(text, max_chars))


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a hostile __repr__
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


def exception_text(exc: BaseException, limit: int = 500) -> str:
    """`Type: message` of an exception, the message truncated to `limit` characters."""
    try:
        detail = str(exc)
    except Exception:
        detail = "<unprintable message>"
    return f"{type(exc).__name__}: {cap_text(detail, limit)}" if detail else type(exc).__name__


class _Outcome:
    """Where the worker thread leaves the call's result."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


def call_with_timeout(fn: Callable[..., Any], arguments: dict[str, Any], timeout_s: float) -> tuple[bool, Any]:
    """Run `fn(**arguments)` in a daemon thread: (True, value), (False, exception), or (False, None) on
    timeout (the thread is abandoned, not killed)."""
    outcome = _Outcome()

    def work() -> None:
        try:
            outcome.value = fn(**arguments)
        except BaseException as exc:  # the tool's failure is reported, never raised here
            outcome.error = exc

    worker = threading.Thread(target=work, name="posttrain-tool", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return False, None
    return (False, outcome.error) if outcome.error is not None else (True, outcome.value)


@dataclass
class ToolSet:
    """The tools of one episode, and the simulated-API state they close over (read by the grader)."""

    tools: Sequence[Tool]
    state: Any = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_result_chars: int = MAX_RESULT_CHARS
    _by_name: dict[str, Tool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {tool.name: tool for tool in self.tools}
        if len(self._by_name) != len(self.tools):
            raise ValueError("two tools share a name")

    def add(self, tools: Sequence[Tool]) -> None:
        """Offer more tools from now on (e.g. functions a task reveals mid-episode)."""
        self.tools = [*self.tools, *tools]
        self.__post_init__()

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The tools' JSON schemas, in order (for the system prompt)."""
        return [tool.schema for tool in self.tools]

    def check(self, call: ToolCall | MalformedCall) -> tuple[ToolStatus, str] | None:
        """Why `call` cannot run (its status and an error for the model), or None when it can."""
        if isinstance(call, MalformedCall):
            return ToolStatus.MALFORMED, call.error
        tool = self._by_name.get(call.name)
        if tool is None:
            known = ", ".join(self._by_name) or "none"
            return ToolStatus.UNKNOWN_TOOL, f"unknown tool {cap_text(call.name, 80)!r} (available: {known})"
        error = argument_error(call.arguments, tool.parameters)
        return None if error is None else (ToolStatus.INVALID_ARGUMENTS, f"{tool.name}: {error}")

    def run(self, call: ToolCall | MalformedCall) -> ToolOutcome:
        """Check and execute one call; every failure becomes an error message."""
        name = call.name if isinstance(call, ToolCall) else ERROR_NAME
        problem = self.check(call)
        if problem is not None:
            return self._outcome(name, problem[0], cap_text(f"Error: {problem[1]}", self.max_result_chars))
        tool = self._by_name[name]
        timeout_s = tool.timeout_s if tool.timeout_s is not None else self.timeout_s
        done, value = call_with_timeout(tool.fn, dict(getattr(call, "arguments", {})), timeout_s)
        if done:
            return self._outcome(name, ToolStatus.OK, result_text(value, self.max_result_chars))
        if value is None:
            return self._outcome(name, ToolStatus.TIMEOUT, f"Error: {name} timed out after {timeout_s:g} s")
        return self._outcome(name, ToolStatus.RAISED, f"Error: {name} failed: {exception_text(value)}")

    def run_all(self, calls: Iterable[ToolCall | MalformedCall]) -> list[ToolOutcome]:
        """Every call in order (a failed call does not stop the ones after it)."""
        return [self.run(call) for call in calls]

    def _outcome(self, name: str, status: ToolStatus, content: str) -> ToolOutcome:
        message = {"role": "tool", "name": clean_text(cap_text(name, 80)), "content": clean_text(content)}
        return ToolOutcome(message, status, name)


DEFAULT_GUIDANCE = "You can call functions to help with the user's request; call as many as you need."
"""The sentence that opens the tools section."""


def render_tools_system_prompt(tools: Sequence[dict[str, Any]] | ToolSet, base_system: str | None = None,
                               guidance: str = DEFAULT_GUIDANCE) -> str:  # fmt: skip
    """A system prompt describing `tools` (schemas or a tool set) in the Hermes/Qwen2.5 layout."""
    schemas = tools.schemas if isinstance(tools, ToolSet) else list(tools)
    listing = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in schemas)
    parts = [base_system.strip()] if base_system and base_system.strip() else []
    parts.append(
        "# Tools\n\n"
        f"{guidance}\n\n"
        "The available functions are described by the JSON schemas inside <tools></tools> tags:\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "To call a function, write a JSON object with the function's name and its arguments between "
        "<tool_call></tool_call> tags, one call per block:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <arguments-json-object>}\n</tool_call>'
    )
    return "\n\n".join(parts)


ToolsPrompt = Literal["hermes", "compact"]
"""How tools are described: `hermes` — the JSON schemas in `<tools>` as Hermes/Qwen2.5 templates do (for
real instruct models); `compact` — one signature line per tool (for the embedded tiny model, whose
context is short). Both ask for the same `<tool_call>` wire format."""


def render_tools_compact(tools: Sequence[dict[str, Any]] | ToolSet, base_system: str | None = None) -> str:
    """A short system prompt: one `name(arg: type, ...): description` line per tool and the call format."""
    schemas = tools.schemas if isinstance(tools, ToolSet) else list(tools)
    lines = []
    for schema in schemas:
        function = schema.get("function", schema)
        properties = (function.get("parameters") or {}).get("properties") or {}
        args = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in properties.items())
        description = str(function.get("description") or "").split("\n")[0]
        lines.append(f"- {function.get('name')}({args}): {description}".rstrip(": "))
    parts = [base_system.strip()] if base_system and base_system.strip() else []
    parts.append("Tools:\n" + "\n".join(lines) + '\nCall one with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.')
    return "\n".join(parts)


def render_tools(style: ToolsPrompt, tools: Sequence[dict[str, Any]] | ToolSet, base_system: str | None = None) -> str:
    """The system prompt describing `tools` in `style`."""
    return render_tools_compact(tools, base_system) if style == "compact" else render_tools_system_prompt(tools, base_system)
