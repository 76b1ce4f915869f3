"""ToolSet: checking calls, running them in order, tools that raise, hang or flood, and the system prompt."""

from __future__ import annotations

import json
import threading

import pytest

from posttrain.envs.tools import (
    MAX_RESULT_CHARS,
    Tool,
    ToolSet,
    ToolStatus,
    cap_text,
    render_tools_system_prompt,
    result_text,
)
from posttrain.verify.tool_calls import MalformedCall, ToolCall, parse_tool_calls


def add(a: int, b: float = 0.5) -> float:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def make_tools(log: list[str] | None = None) -> ToolSet:
    log = log if log is not None else []

    def record(text: str) -> str:
        """Append text to the log."""
        log.append(text)
        return f"recorded {text}"

    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    release = threading.Event()

    def hang() -> str:
        """Never returns in time."""
        release.wait(30)
        return "late"

    def flood() -> str:
        """Returns 100 MB."""
        return "x" * 100_000_000

    def stats() -> dict[str, object]:
        """A structured result."""
        return {"count": 2, "names": ["ä", "b"]}

    tools = [Tool.from_function(fn) for fn in (add, record, explode, flood, stats)]
    tools.append(Tool.from_function(hang, timeout_s=0.2))
    toolset = ToolSet(tools, state=log)
    toolset.state = (log, release)
    return toolset


@pytest.mark.parametrize(("call", "status", "expected"), [
    (MalformedCall("{", "invalid JSON in tool call: x"), ToolStatus.MALFORMED, "invalid JSON"),
    (ToolCall("subtract", {"a": 1}), ToolStatus.UNKNOWN_TOOL, "unknown tool 'subtract' (available: add, record"),
    (ToolCall("add", {}), ToolStatus.INVALID_ARGUMENTS, "add: missing required argument 'a'"),
    (ToolCall("add", {"a": 1, "c": 2}), ToolStatus.INVALID_ARGUMENTS, "unexpected argument 'c'"),
    (ToolCall("add", {"a": "1"}), ToolStatus.INVALID_ARGUMENTS, "'a' must be of type integer, got string"),
    (ToolCall("add", {"a": True}), ToolStatus.INVALID_ARGUMENTS, "'a' must be of type integer, got boolean"),
])  # fmt: skip
def test_bad_calls_become_error_messages_with_their_kind(call: ToolCall | MalformedCall, status: ToolStatus,
                                                          expected: str) -> None:  # fmt: skip
    outcome = make_tools().run(call)
    assert outcome.status is status and status.is_malformed
    assert outcome.message["role"] == "tool"
    assert outcome.message["content"].startswith("Error: ") and expected in outcome.message["content"]


def test_valid_calls_run_in_order_and_results_are_text() -> None:
    log: list[str] = []
    tools = make_tools(log)
    text = "".join(f'<tool_call>{{"name": "record", "arguments": {{"text": "{i}"}}}}</tool_call>' for i in range(5))
    outcomes = tools.run_all(parse_tool_calls(text))
    assert log == ["0", "1", "2", "3", "4"]
    assert [o.message["content"] for o in outcomes] == [f"recorded {i}" for i in range(5)]
    assert tools.run(ToolCall("add", {"a": 2, "b": 3})).message == {"role": "tool", "name": "add", "content": "5"}
    assert tools.run(ToolCall("add", {"a": 2})).message["content"] == "2.5"
    assert json.loads(tools.run(ToolCall("stats", {})).message["content"]) == {"count": 2, "names": ["ä", "b"]}


def test_a_failing_call_does_not_stop_the_next() -> None:
    log: list[str] = []
    outcomes = make_tools(log).run_all([ToolCall("explode", {"reason": "boom"}), ToolCall("record", {"text": "a"})])
    assert [o.status for o in outcomes] == [ToolStatus.RAISED, ToolStatus.OK]
    assert log == ["a"]


def test_a_tool_that_raises_reports_type_and_truncated_message() -> None:
    outcome = make_tools().run(ToolCall("explode", {"reason": "r" * 10_000}))
    assert outcome.status is ToolStatus.RAISED and not outcome.status.is_malformed
    assert outcome.message["content"].startswith("Error: explode failed: ValueError: rrr")
    assert len(outcome.message["content"]) < 1000


def test_a_tool_that_hangs_times_out_and_the_set_keeps_working() -> None:
    tools = make_tools()
    outcome = tools.run(ToolCall("hang", {}))
    assert outcome.status is ToolStatus.TIMEOUT
    assert outcome.message["content"] == "Error: hang timed out after 0.2 s"
    assert tools.run(ToolCall("add", {"a": 1, "b": 1})).status is ToolStatus.OK
    tools.state[1].set()  # let the abandoned worker finish


def test_a_tool_returning_100_mb_is_capped_saying_how_much_was_cut() -> None:
    content = make_tools().run(ToolCall("flood", {})).message["content"]
    assert len(content) < MAX_RESULT_CHARS + 200
    assert f"[... {100_000_000 - MAX_RESULT_CHARS} of 100000000 characters cut ...]" in content
    assert content.startswith("xxx") and content.endswith("xxx")


def test_cap_keeps_head_and_tail() -> None:
    assert cap_text("abcdefghij", 4) == "ab\n[... 6 of 10 characters cut ...]\nij"
    assert cap_text("abcd", 4) == "abcd"


def test_results_are_valid_utf8_even_with_surrogates_or_unserialisable_values() -> None:
    assert result_text("a\ud800b").encode("utf-8")
    assert result_text({1, 2}) == '"{1, 2}"'  # not JSON: its str, as a JSON string
    assert result_text(_Circular()) == "[[...]]"  # JSON refuses the cycle: its repr

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert result_text(Hostile()) == "<unprintable Hostile: RuntimeError>"


class _Circular(list[object]):
    def __init__(self) -> None:
        super().__init__()
        self.append(self)


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ValueError):
        ToolSet([Tool.from_function(add), Tool.from_function(add)])


def test_system_prompt_lists_schemas_in_tools_tags_and_the_call_format() -> None:
    tools = make_tools()
    prompt = render_tools_system_prompt(tools, "You are helpful.")
    assert prompt.startswith("You are helpful.\n\n# Tools")
    listed = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    assert [json.loads(line) for line in listed] == tools.schemas
    assert '<tool_call>\n{"name": <function-name>, "arguments": <arguments-json-object>}\n</tool_call>' in prompt
    assert render_tools_system_prompt(tools.schemas).startswith("# Tools")


def test_an_explicit_schema_is_used_as_given() -> None:
    schema = {"type": "function", "function": {"name": "scale", "description": "Scale a value.", "parameters": {
        "type": "object", "properties": {"factor": {"type": "number", "enum": [0.5, 2]}}, "required": ["factor"]}}}
    tools = ToolSet([Tool(lambda factor: factor * 10, schema)])
    assert tools.schemas == [schema]
    assert tools.run(ToolCall("scale", {"factor": 2})).message["content"] == "20"
    assert tools.run(ToolCall("scale", {"factor": 3})).status is ToolStatus.INVALID_ARGUMENTS


def test_compact_tools_prompt_lists_one_signature_per_tool() -> None:
    from posttrain.envs.tools import Tool, ToolSet, render_tools, render_tools_compact

    def lookup(key: str, limit: int = 3) -> str:
        """Find a record.

        Args:
            key: What to find.
            limit: How many.
        """
        return key

    tools = ToolSet([Tool.from_function(lookup)])
    text = render_tools_compact(tools, "You help.")
    assert text.splitlines()[:3] == ["You help.", "Tools:", "- lookup(key: string, limit: integer): Find a record."]
    assert "<tool_call>" in text and "<tools>" not in text
    assert render_tools("hermes", tools, "You help.") != text and "<tools>" in render_tools("hermes", tools)
