"""BFCL multi-turn domains: turn feeding, state grading, miss_func reveal, hacks, sandbox = process."""

from __future__ import annotations

import importlib.util
from functools import cache

import pytest

if importlib.util.find_spec("bfcl_eval") is None:
    pytest.skip("the bfcl-eval package is not installed (pip install --no-deps bfcl-eval)", allow_module_level=True)

from typing import Any

from posttrain.envs.base import run_scripted
from posttrain.envs.tools import ToolSet, ToolStatus
from posttrain.tasks.base import GOLD_TURNS, EnvironmentFamily
from posttrain.tasks.families.bfcl_multi import (
    TURN_DONE,
    BfclMultiConfig,
    BfclMultiFamily,
    Episode,
    episode_tools,
)
from posttrain.tasks.families.bfcl_runner import apply
from posttrain.tasks.registry import DomainEntry, DomainRegistry
from posttrain.types import Task
from posttrain.verify.tool_calls import ToolCall, format_tool_call

GOLD_EXCEPTIONS = {
    # close_ticket's schema says ticket_id is an integer; the ground truth passes "ticket_001" (BFCL never
    # checks arguments against the schema, our tool set does): the gold call is refused.
    "agent/bfcl_multi/multi_turn_base#multi_turn_base_173": "fail: no call",
    "agent/bfcl_multi/multi_turn_miss_func#multi_turn_miss_func_173": "fail: no call",
    "agent/bfcl_multi/multi_turn_miss_param#multi_turn_miss_param_173": "fail: no call",
    "agent/bfcl_multi/multi_turn_long_context#multi_turn_long_context_173": "fail: no call",
    # The ground truth calls `tail` in turn 1, but the entry holds `tail` back until turn 2.
    "agent/bfcl_multi/multi_turn_miss_func#multi_turn_miss_func_49": "fail: results",
}
"""Every entry whose gold does not score 1 (measured over all 800 entries), with its first failing verdict."""
BASE, MISS_FUNC = "agent/bfcl_multi/multi_turn_base", "agent/bfcl_multi/multi_turn_miss_func"


@cache
def registry(isolation: str = "process") -> DomainRegistry:
    return DomainRegistry([DomainEntry(family=BfclMultiConfig(isolation=isolation))])  # type: ignore[arg-type]


def task(domain_id: str, index: int) -> Task:
    domain = registry().get(domain_id)
    return domain.family.task(domain.spec, index, seed=0)


def test_domains_ids_and_contract() -> None:
    assert registry().ids() == [f"agent/bfcl_multi/multi_turn_{c}" for c in ("base", "miss_func", "miss_param", "long_context")]
    family = registry().get(BASE).family
    assert isinstance(family, BfclMultiFamily) and isinstance(family, EnvironmentFamily)
    assert registry().environment(BASE) is not registry().environment(BASE)
    first = task(BASE, 0)
    assert first.id == f"{BASE}#multi_turn_base_0"
    assert first.prompt.startswith("Move 'final_report.pdf'") and len(first.metadata["user_turns"]) == 3


@pytest.mark.parametrize("domain_id", [BASE, MISS_FUNC, "agent/bfcl_multi/multi_turn_miss_param",
                                       "agent/bfcl_multi/multi_turn_long_context"])  # fmt: skip
def test_gold_scores_one_except_pinned(domain_id: str) -> None:
    for index in range(0, 200, 25):  # a sample here; all 800 are measured in docs/agents.md
        t = task(domain_id, index)
        score = registry().score_episode(t, t.metadata[GOLD_TURNS])
        assert (score.reward == 1.0 and score.passed) == (t.id not in GOLD_EXCEPTIONS), (t.id, score.details)
    for task_id, verdict in GOLD_EXCEPTIONS.items():
        if task_id.startswith(domain_id + "#"):
            t = task(domain_id, int(task_id.rsplit("_", 1)[1]))
            score = registry().score_episode(t, t.metadata[GOLD_TURNS])
            assert not score.passed and score.reward < 1.0 and verdict in score.details["turn_verdicts"]


def test_turns_are_fed_in_order_and_a_text_message_ends_a_turn() -> None:
    t = task(BASE, 0)
    env = registry().environment(BASE)
    assert env is not None
    transcript, score = run_scripted(env, t, t.metadata[GOLD_TURNS])
    users = [m["content"] for m in transcript if m["role"] == "user"]
    assert users == [t.prompt, *t.metadata["user_turns"]]
    assert transcript[0]["role"] == "system" and '"name": "mv"' in transcript[0]["content"]
    assert score.details["end_reason"] == "completed" and score.details["turn_verdicts"] == ["pass"] * 4


def test_state_is_checked_after_each_turn() -> None:
    t = task(BASE, 0)  # turn 0: cd document, mkdir temp, mv final_report.pdf temp
    gold = list(t.metadata[GOLD_TURNS])
    wrong = gold[0].replace('"destination": "temp"', '"destination": "elsewhere.pdf"')
    assert wrong != gold[0]
    score = registry().score_episode(t, [wrong, *gold[1:]])
    assert not score.passed and score.details["turn_verdicts"][0] == "fail: state"
    assert 0.0 <= score.reward == score.details["completion"] < 1.0


def test_miss_func_holds_functions_back_until_their_turn() -> None:
    t = task(MISS_FUNC, 0)  # `sort` is added at turn 3
    assert t.gold["holdout"] == {"3": ["sort"]}
    env = registry().environment(MISS_FUNC)
    assert env is not None
    observation = env.reset(t)
    assert "sort" not in {s["function"]["name"] for s in observation.tools}
    early = env.step(format_tool_call("sort", {"file_name": "final_report.pdf"}))
    assert "unknown tool 'sort'" in early.messages[0]["content"]
    for message in (TURN_DONE, TURN_DONE):
        env.step(message)
    reveal = env.step(TURN_DONE).messages[-1]
    assert reveal["role"] == "user" and '"name": "sort"' in reveal["content"]
    late = env.step(format_tool_call("sort", {"file_name": "final_report.pdf"}))
    assert "unknown tool" not in late.messages[0]["content"]  # it ran (the file is elsewhere by now)
    transcript, score = run_scripted(registry().environment(MISS_FUNC), t, t.metadata[GOLD_TURNS])  # type: ignore[arg-type]
    assert score.passed and score.details["turn_verdicts"][2:4] == ["not checked", "pass"]  # turn 2 cannot be done


@pytest.mark.parametrize("turns", [[], [""], ["garbage \x00 <tool_call>{oops"], ["I moved the file and everything is done."],
                                   ["All done!"] * 6])  # fmt: skip
def test_garbage_empty_and_claims_without_calls_score_zero(turns: list[str]) -> None:
    score = registry().score_episode(task(BASE, 0), turns)
    assert score.reward == 0.0 and not score.passed and score.details["completion"] == 0.0


class _Raising:
    def explode(self, reason: str) -> str:
        raise ValueError(f"boom: {reason}")


def test_a_raising_tool_returns_an_error_message() -> None:
    # The BFCL APIs catch their own errors (they return {"error": ...}), so a raising method is a fake here.
    assert apply({"X": _Raising()}, "explode", {"reason": "r"}) == (False, "Error during execution: boom: r")
    assert apply({"X": _Raising()}, "missing", {})[0] is False

    class Apis:
        def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
            return apply({"X": _Raising()}, name, arguments)

    episode = Episode({}, Apis())  # type: ignore[arg-type]
    doc = {"name": "explode", "parameters": {"type": "dict", "properties": {"reason": {"type": "string"}}}}
    outcome = ToolSet(episode_tools(episode, [doc], 5.0)).run(ToolCall("explode", {"reason": "r"}))
    assert outcome.status is ToolStatus.RAISED and "boom: r" in outcome.message["content"]
    assert episode.results == [(0, "Error during execution: boom: r")]


def sandbox_or_skip() -> DomainRegistry:
    from posttrain.sandbox.host import backend_for

    backend, reason = backend_for("auto", True)
    if backend is None:
        pytest.skip(f"no isolating sandbox here: {reason}")
    return registry("sandbox")


@pytest.mark.parametrize(("domain_id", "index"), [(BASE, 0), (MISS_FUNC, 49), ("agent/bfcl_multi/multi_turn_base", 30)])
def test_sandbox_and_process_give_the_same_episode(domain_id: str, index: int) -> None:
    sandboxed = sandbox_or_skip()
    t = task(domain_id, index)
    turns = [*t.metadata[GOLD_TURNS][:1], format_tool_call("cd", {"folder": "nowhere"}), *t.metadata[GOLD_TURNS][1:]]
    runs = [run_scripted(reg.environment(domain_id), t, turns) for reg in (registry(), sandboxed)]  # type: ignore[arg-type]
    (process_transcript, process_score), (sandbox_transcript, sandbox_score) = runs
    assert sandbox_transcript == process_transcript
    assert sandbox_score == process_score


def test_gold_scores_one_through_the_sandbox() -> None:
    sandboxed = sandbox_or_skip()
    for domain_id, index in ((BASE, 0), (MISS_FUNC, 0)):
        t = task(domain_id, index)
        score = sandboxed.score_episode(t, t.metadata[GOLD_TURNS])
        assert score.passed and score.reward == 1.0, score.details
