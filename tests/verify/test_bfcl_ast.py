"""BFCL's AST checker: one property per test, on hand-written entries, through the wire format."""

from __future__ import annotations

from typing import Any

import pytest

from posttrain.types import Score, Task
from posttrain.verify.base import score_safely
from posttrain.verify.bfcl_ast import (
    BfclAstVerifier,
    Expect,
    check_call,
    grade_calls,
    standardize,
    value_matches,
)
from posttrain.verify.configs import BfclAstConfig
from posttrain.verify.tool_calls import format_tool_call

AREA = {
    "name": "area", "description": "Area of a rectangle.",
    "parameters": {"type": "dict", "required": ["width", "height"], "properties": {
        "width": {"type": "float"}, "height": {"type": "integer"}, "unit": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}}, "opts": {"type": "dict"},
        "exact": {"type": "boolean"},
    }},
}
WEATHER = {
    "name": "weather.get", "description": "Weather for a city.",
    "parameters": {"type": "dict", "required": ["city"], "properties": {"city": {"type": "string"}}},
}
AREA_ALLOWED: dict[str, Any] = {
    "width": [2.5], "height": [4], "unit": ["meters", "m", ""], "tags": [["a", "b"], ""],
    "opts": [{"round": [True], "digits": [2, ""]}, ""], "exact": ["", False],
}


def task(calls: list[dict[str, Any]], functions: list[dict[str, Any]] | None = None) -> Task:
    gold = {"functions": functions or [AREA, WEATHER], "calls": calls}
    return Task(id="agent/bfcl/x#1", domain_id="agent/bfcl/x", prompt="p", gold=gold)


def grade(response: str, calls: list[dict[str, Any]], expect: Expect = "one") -> Score:
    return score_safely(BfclAstVerifier(BfclAstConfig(expect=expect)), task(calls), response)


AREA_CALL = [{"name": "area", "allowed": AREA_ALLOWED}]
CITIES = [{"name": "weather.get", "allowed": {"city": ["Paris"]}}, {"name": "weather.get", "allowed": {"city": ["Rome"]}}]


def call(name: str, **arguments: Any) -> str:
    return format_tool_call(name, arguments)


def test_a_correct_call_passes_with_int_for_float_and_normalised_strings() -> None:
    score = grade(call("area", width=2.5, height=4, unit="M"), AREA_CALL)
    assert score.passed and score.reward == 1.0
    assert grade(call("area", width=2, height=4), [{"name": "area", "allowed": {"width": [2.0], "height": [4]}}]).passed


def test_wrong_function_name_fails_on_the_name_check() -> None:
    score = grade(call("weather.get", city="Paris"), AREA_CALL)
    assert not score.passed and score.details["failed_check"] == "name"


def test_missing_required_parameter_fails() -> None:
    score = grade(call("area", width=2.5), AREA_CALL)
    assert score.details["failed_check"] == "required" and "height" in score.details["calls"][0]["detail"]


def test_unknown_parameter_fails() -> None:
    assert grade(call("area", width=2.5, height=4, colour="red"), AREA_CALL).details["failed_check"] == "unknown_param"


@pytest.mark.parametrize("arguments", [{"width": 2.5, "height": 4.0}, {"width": "2.5", "height": 4},
                                       {"width": 2.5, "height": True}, {"width": 2.5, "height": 4, "tags": "a"}])
def test_wrong_type_fails(arguments: dict[str, Any]) -> None:
    assert grade(call("area", **arguments), AREA_CALL).details["failed_check"] == "type"


@pytest.mark.parametrize("arguments", [{"height": 5}, {"unit": "feet"}, {"tags": ["b", "a"]}, {"tags": ["a"]},
                                       {"opts": {"round": False}}, {"opts": {"round": True, "extra": 1}},
                                       {"exact": True}])
def test_a_value_not_allowed_fails(arguments: dict[str, Any]) -> None:
    score = grade(call("area", **{"width": 2.5, "height": 4, **arguments}), AREA_CALL)
    assert not score.passed and score.details["failed_check"] == "value"


def test_lists_and_dicts_compare_element_wise_with_optional_keys() -> None:
    response = call("area", width=2.5, height=4, tags=["A", "b"], opts={"round": True}, exact=False)
    assert grade(response, AREA_CALL).passed


def test_a_parameter_without_empty_alternative_must_be_given() -> None:
    allowed = [{"name": "area", "allowed": {"width": [2.5], "height": [4], "unit": ["cm"]}}]
    assert grade(call("area", width=2.5, height=4), allowed).details["failed_check"] == "missing_param"


def test_a_schema_parameter_the_answer_does_not_name_is_unexpected() -> None:
    allowed = [{"name": "area", "allowed": {"width": [2.5], "height": [4]}}]
    assert grade(call("area", width=2.5, height=4, unit="cm"), allowed).details["failed_check"] == "unexpected_param"


def test_an_extra_call_in_a_single_call_category_fails() -> None:
    response = call("area", width=2.5, height=4) + call("weather.get", city="Paris")
    assert grade(response, AREA_CALL).details["failed_check"] == "count"


def test_parallel_calls_in_any_order_pass() -> None:
    assert grade(call("weather.get", city="rome") + call("weather.get", city="Paris"), CITIES, "parallel").passed


def test_parallel_needs_each_expected_call_matched_once() -> None:
    score = grade(call("weather.get", city="Paris") + call("weather.get", city="Paris"), CITIES, "parallel")
    assert not score.passed and score.details["failed_check"] == "value"


def test_parallel_matching_is_not_greedy() -> None:
    # The first produced call fits both expected calls, the second fits only the first: a greedy
    # first-fit would give call 0 to expected 0 and strand call 1.
    calls = [{"name": "weather.get", "allowed": {"city": ["Paris", "Rome"]}},
             {"name": "weather.get", "allowed": {"city": ["Paris"]}}]
    assert grade(call("weather.get", city="Paris") + call("weather.get", city="Rome"), calls, "parallel").passed


@pytest.mark.parametrize("response", [call("weather.get", city="Paris"), "<tool_call>{not json</tool_call>",
                                      "I will call <tool_call>"])
def test_any_call_in_irrelevance_fails(response: str) -> None:
    assert not grade(response, [], "none").passed


def test_irrelevance_passes_with_a_text_answer_and_fails_empty() -> None:
    assert grade("No function fits that request.", [], "none").passed
    assert not grade("  \n", [], "none").passed


def test_a_malformed_call_fails_with_its_reason() -> None:
    score = grade(call("area", width=2.5, height=4) + "<tool_call>{\"name\": 3}</tool_call>", AREA_CALL)
    assert score.details["failed_check"] == "malformed" and score.details["calls"][0]["detail"]


@pytest.mark.parametrize("response", ["", "zzq ### \x00 garbage", "<tool_call>" * 50_000, "x" * 1_000_000,
                                      call("area", width=2.5, height=4) * 40, "\ud800 bad surrogate",
                                      "<tool_call>" + "[" * 5000 + "</tool_call>"])
def test_garbage_fails_and_never_raises(response: str) -> None:
    score = grade(response, AREA_CALL)
    assert not score.passed and score.reward == 0.0 and not score.is_infra_failure


def test_bad_gold_is_an_infra_failure() -> None:
    bad = Task(id="t", domain_id="agent/bfcl/x", prompt="p", gold={"calls": "nope"})
    assert score_safely(BfclAstVerifier(BfclAstConfig(expect="one")), bad, call("area")).is_infra_failure


def test_standardize_drops_bfcl_punctuation_and_case() -> None:
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"
    assert standardize("it's") == 'it"s'


def test_bool_is_never_a_number() -> None:
    assert not value_matches(True, 1) and not value_matches(1, True) and value_matches(1, 1.0)


def test_a_variable_of_the_answer_type_skips_the_schema_type() -> None:
    # BFCL accepts a name standing for a number when the answer itself is that name.
    doc = {"name": "f", "parameters": {"type": "dict", "required": ["n"], "properties": {"n": {"type": "integer"}}}}
    assert check_call("f", {"n": "count"}, doc, {"n": ["count"]}).ok
    assert check_call("f", {"n": "other"}, doc, {"n": ["count"]}).check == "value"


def test_grade_calls_reports_the_check_per_call() -> None:
    score = grade_calls([("weather.get", {"city": "Rome"}), ("weather.get", {"city": "Oslo"})],
                        task(CITIES).gold, "parallel")
    checks = sorted(row["check"] for row in score.details["calls"])
    assert checks == ["ok", "value"]
