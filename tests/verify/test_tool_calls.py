"""The Hermes tool-call wire format: valid, several, malformed and hostile messages."""

from __future__ import annotations

import json

import pytest

from posttrain.verify.tool_calls import (
    MalformedCall,
    ToolCall,
    content_without_calls,
    format_tool_call,
    parse_tool_calls,
)


def test_one_call_round_trips_through_the_formatter() -> None:
    text = "Let me look.\n" + format_tool_call("get_weather", {"city": "Zürich", "days": 3})
    assert parse_tool_calls(text) == [ToolCall("get_weather", {"city": "Zürich", "days": 3}, 0)]
    assert content_without_calls(text) == "Let me look."


def test_several_calls_keep_their_order_and_a_malformed_one_its_place() -> None:
    text = (format_tool_call("a", {"x": 1}) + "<tool_call>{not json}</tool_call>"
            + format_tool_call("b", {}) + "<tool_call>[1, 2]</tool_call>")
    items = parse_tool_calls(text)
    assert [type(i).__name__ for i in items] == ["ToolCall", "MalformedCall", "ToolCall", "MalformedCall"]
    assert [i.index for i in items] == [0, 1, 2, 3]
    assert isinstance(items[1], MalformedCall) and "invalid JSON" in items[1].error
    assert isinstance(items[3], MalformedCall) and "JSON object" in items[3].error


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"arguments": {}}', "name"),
        ('{"name": "", "arguments": {}}', "name"),
        ('{"name": 7}', "name"),
        ('{"name": "f", "arguments": [1]}', "must be a JSON object"),
        ('{"name": "f", "arguments": "not json"}', "not a JSON object"),
        ('"just a string"', "JSON object"),
        ("", "invalid JSON"),
    ],
)
def test_malformed_bodies_name_the_problem(body: str, reason: str) -> None:
    (item,) = parse_tool_calls(f"<tool_call>{body}</tool_call>")
    assert isinstance(item, MalformedCall) and reason in item.error


def test_arguments_as_a_json_string_or_missing_are_accepted() -> None:
    text = '<tool_call>{"name": "f", "arguments": "{\\"k\\": 1}"}</tool_call><tool_call>{"name": "g"}</tool_call>'
    assert parse_tool_calls(text) == [ToolCall("f", {"k": 1}, 0), ToolCall("g", {}, 1)]


def test_an_unterminated_call_is_reported_and_the_text_before_it_kept() -> None:
    text = format_tool_call("a", {}) + ' then <tool_call>{"name": "b", "argu'
    items = parse_tool_calls(text)
    assert isinstance(items[0], ToolCall) and isinstance(items[1], MalformedCall)
    assert "unterminated" in items[1].error
    assert content_without_calls(text) == "then"


def test_no_calls_in_plain_text_or_garbage() -> None:
    assert parse_tool_calls("The answer is 4.") == []
    assert parse_tool_calls("\udcff\x00" * 1000 + "</tool_call>") == []  # lone closing tag, surrogates


def test_endless_calls_are_cut_at_the_cap() -> None:
    items = parse_tool_calls(format_tool_call("f", {}) * 1000, max_calls=16)
    assert len(items) == 17 and all(isinstance(i, ToolCall) for i in items[:16])
    assert isinstance(items[16], MalformedCall) and "more than 16" in items[16].error


def test_a_megabyte_and_deep_nesting_do_not_raise() -> None:
    big = "<tool_call>" + json.dumps({"name": "f", "arguments": {"blob": "x" * (1 << 20)}}) + "</tool_call>"
    (item,) = parse_tool_calls(big)
    assert isinstance(item, ToolCall) and len(item.arguments["blob"]) == 1 << 20
    deep = "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>"
    (item,) = parse_tool_calls(deep)
    assert isinstance(item, MalformedCall)
