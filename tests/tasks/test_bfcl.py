"""BFCL single-turn domains: ids, prompts, opt-in registration and gold validation per category."""

from __future__ import annotations

import json
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.families.bfcl import CATEGORIES, BfclConfig, BfclFamily, gold_arguments, to_json_schema
from posttrain.tasks.registry import DomainEntry, DomainRegistry, DomainsConfig
from posttrain.types import Task
from posttrain.verify.build import build_verifier
from posttrain.verify.tool_calls import ToolCall, parse_tool_calls

GOLD_EXCEPTIONS = {
    # The answer names a parameter the function's schema does not have: no call can pass (nor in BFCL).
    "agent/bfcl/parallel_multiple#parallel_multiple_26": "unknown_param",
    "agent/bfcl/live_multiple#live_multiple_862-181-3": "unknown_param",
    # A required parameter is absent from the answer: giving it is unexpected, leaving it out is missing.
    "agent/bfcl/live_multiple#live_multiple_964-207-0": "required",
    # A required array parameter whose only allowed value is "" (omit): no value of the right type fits.
    "agent/bfcl/live_simple#live_simple_106-63-0": "type",
    "agent/bfcl/live_simple#live_simple_112-68-0": "type",
}
"""Entries whose BFCL ground truth cannot score 1 under BFCL's own rules (documented in
docs/architecture.md, "BFCL"), with the check that fails."""


@cache
def registry() -> DomainRegistry:
    return DomainRegistry([DomainEntry(family=BfclConfig())])


def tasks(domain_id: str) -> list[Task]:
    domain = registry().get(domain_id)
    return [domain.family.task(domain.spec, i, seed=0) for i in range(domain.spec.size or 0)]


@cache
def gold_failures() -> dict[str, dict[str, str]]:
    """Per domain: task id -> the failed check, for every gold answer that does not score 1."""
    failures: dict[str, dict[str, str]] = defaultdict(dict)
    for domain_id in registry().ids():
        verifier = build_verifier(registry().verifier_config(domain_id))
        for task in tasks(domain_id):
            score = verifier.score(task, task.answer or "")
            if not (score.passed and score.reward == 1.0):
                failures[domain_id][task.id] = str(score.details.get("failed_check", score.message))
    return failures


def test_every_single_turn_category_is_a_domain_with_bfcl_ids() -> None:
    assert registry().ids() == [f"agent/bfcl/{c}" for c in CATEGORIES]
    first = tasks("agent/bfcl/simple_python")[0]
    assert first.id == "agent/bfcl/simple_python#simple_python_0"
    assert tasks("agent/bfcl/live_simple")[0].id.startswith("agent/bfcl/live_simple#live_simple_0")


def test_the_family_is_opt_in() -> None:
    assert not any(isinstance(entry.family, BfclConfig) for entry in DomainsConfig().domains)


def test_the_prompt_offers_the_functions_as_tools_then_the_user_turn() -> None:
    task = tasks("agent/bfcl/simple_python")[0]
    assert not isinstance(task.prompt, str)
    system, user = task.prompt
    assert (system.role, user.role) == ("system", "user") and "triangle" in user.content
    tools = system.content.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
    schema = json.loads(tools[0])
    assert schema["function"]["name"] == "calculate_triangle_area"
    assert schema["function"]["parameters"]["type"] == "object" and "<tool_call>" in system.content


def test_a_bfcl_system_message_comes_before_the_tools_in_one_system_message() -> None:
    task = next(t for t in tasks("agent/bfcl/live_multiple") if t.id.endswith("live_multiple_964-207-0"))
    assert not isinstance(task.prompt, str)
    assert [m.role for m in task.prompt] == ["system", "user"]
    assert task.prompt[0].content.startswith("You are a bot") and "<tools>" in task.prompt[0].content


def test_schema_types_become_json_schema_types() -> None:
    schema = to_json_schema({"type": "dict", "properties": {"x": {"type": "float"}, "t": {"type": "tuple",
                                                                                    "items": {"type": "any"}}}})
    assert schema == {"type": "object", "properties": {"x": {"type": "number"},
                                                       "t": {"type": "array", "items": {"type": "string"}}}}


def test_gold_takes_first_values_and_skips_omittable_optionals() -> None:
    allowed = {"a": [1, 2], "b": ["", "x"], "c": [{"k": ["v"], "o": ["", 1]}], "r": ["", "y"]}
    assert gold_arguments(allowed, required=["r"]) == {"a": 1, "c": {"k": "v"}, "r": "y"}


def test_gold_answers_are_tool_calls_except_for_irrelevance() -> None:
    parallel = tasks("agent/bfcl/parallel")[0]
    assert len(parse_tool_calls(parallel.answer or "")) == len(parallel.gold["calls"]) >= 2
    assert all(isinstance(c, ToolCall) for c in parse_tool_calls(parallel.answer or ""))
    assert parse_tool_calls(tasks("agent/bfcl/irrelevance")[0].answer or "") == []


@pytest.mark.parametrize("category", CATEGORIES)
def test_gold_scores_one_on_at_least_98_percent_of_each_category(category: str) -> None:
    domain_id = f"agent/bfcl/{category}"
    size = registry().get(domain_id).spec.size or 0
    rate = 1 - len(gold_failures().get(domain_id, {})) / size
    assert size > 0 and rate >= 0.98, (rate, gold_failures().get(domain_id))


def test_gold_exceptions_are_exactly_the_documented_ones() -> None:
    found = {task_id: check for per_domain in gold_failures().values() for task_id, check in per_domain.items()}
    assert found == GOLD_EXCEPTIONS


def test_a_missing_data_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        BfclFamily(BfclConfig(categories=["parallel"], data_dir=tmp_path))
