"""The tool-call wire format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` in assistant text.

This is the Hermes convention Qwen2.5 and SmolLM2 chat templates use: each call is one JSON object
between the tags, several per message are allowed and run in order, and results go back to the model
as `role: tool` messages. `parse_tool_calls` turns an assistant message into an ordered list whose items
are either a well-formed `ToolCall` or a `MalformedCall` (with the reason, to be returned to the model
as a tool error); `format_tool_call` writes one call (scripted policies, gold answers).

Guarantees: pure and total — any string (empty, 1 MB, unterminated tags, nested tags, invalid JSON,
JSON that is not an object) gives a list and never raises; at most `max_calls` items, the rest reported
as one `MalformedCall`; `arguments` given as a JSON-encoded string holding an object is accepted (some
models write it so). Not here: whether the named tool exists or its arguments fit its schema (the
tool set checks that), running anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
MAX_CALLS = 16
"""Default cap on calls per assistant message; a policy emitting more is cut off with an error."""


@dataclass(frozen=True)
class ToolCall:
    """One well-formed call: a tool name and its keyword arguments, in message order."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    """Position among the message's calls (well-formed or not), from 0."""


@dataclass(frozen=True)
class MalformedCall:
    """A `<tool_call>` block that could not be read as a call, and why (returned to the model)."""

    raw: str
    error: str
    index: int = 0


def _read_call(raw: str, index: int) -> ToolCall | MalformedCall:
    text = raw.strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return MalformedCall(raw, f"invalid JSON in tool call: {str(exc)[:120]}", index)
    if not isinstance(data, dict):
        return MalformedCall(raw, "a tool call must be a JSON object with \"name\" and \"arguments\"", index)
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return MalformedCall(raw, "a tool call needs a \"name\" string", index)
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):  # a JSON-encoded object, as some models write it
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return MalformedCall(raw, f"\"arguments\" of {name!r} is a string that is not a JSON object", index)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return MalformedCall(raw, f"\"arguments\" of {name!r} must be a JSON object", index)
    return ToolCall(name, arguments, index)


def _blocks(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, inner text) of each complete `<tool_call>...</tool_call>` block, in order: a block runs
    from an opening tag to the next closing tag. Linear in the text, whatever it holds (a regex scan
    restarting at every unclosed opening tag is quadratic)."""
    end = 0
    while (start := text.find(OPEN, end)) >= 0:
        close = text.find(CLOSE, start + len(OPEN))
        if close < 0:
            return
        end = close + len(CLOSE)
        yield start, end, text[start + len(OPEN) : close]


def parse_tool_calls(text: str, max_calls: int = MAX_CALLS) -> list[ToolCall | MalformedCall]:
    """Every `<tool_call>` block of an assistant message, in order, read as a call or as a malformed one.

    A `<tool_call>` with no closing tag after the last complete block (a response cut at the token
    budget, or a typo) is one `MalformedCall`; blocks beyond `max_calls` become one more `MalformedCall`.
    """
    items: list[ToolCall | MalformedCall] = []
    end = 0
    for _start, block_end, inner in _blocks(text):
        if len(items) == max_calls:
            items.append(MalformedCall("", f"more than {max_calls} tool calls in one message; the rest "
                                           "were not run", len(items)))  # fmt: skip
            return items
        items.append(_read_call(inner, len(items)))
        end = block_end
    tail = text.find(OPEN, end)
    if tail >= 0:
        items.append(MalformedCall(text[tail : tail + 200], "unterminated <tool_call> (no </tool_call>)", len(items)))
    return items


def content_without_calls(text: str) -> str:
    """The message's text outside its tool-call blocks (an unterminated block runs to the end)."""
    pieces, end = [], 0
    for start, block_end, _inner in _blocks(text):
        pieces.append(text[end:start])
        end = block_end
    kept = "".join(pieces) + text[end:]
    tail = kept.find(OPEN)
    return (kept if tail < 0 else kept[:tail]).strip()


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """One call in the wire format, e.g. for scripted policies and gold answers."""
    return f"{OPEN}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{CLOSE}"
