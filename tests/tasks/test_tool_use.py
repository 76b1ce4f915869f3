"""The tool-use families: gold = 1, validation, determinism, failure injection, isolation, hacks, bad input."""

from __future__ import annotations

import threading

import pytest

from posttrain.envs.base import MAX_TOOL_CALLS, run_scripted
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.families.tool_use import SPECS, ToolUseConfig, ToolUseFamily
from posttrain.tasks.families.tool_use.common import TRANSIENT, Api, fails_at, final_answer, tool_set
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, DomainsConfig
from posttrain.tasks.validate import validate_domain
from posttrain.types import DomainSpec, Score, Task
from posttrain.verify.tool_calls import ToolCall, format_tool_call

FAMILY = ToolUseFamily(ToolUseConfig())
DOMAINS = {d.id: d for d in FAMILY.domains()}
IDS = sorted(DOMAINS)


def task_of(domain_id: str, index: int = 0, family: ToolUseFamily = FAMILY) -> Task:
    return family.task(DOMAINS[domain_id], index, seed=5)


def score(task: Task, turns: list[str], family: ToolUseFamily = FAMILY) -> Score:
    return run_scripted(family.environment(DOMAINS[task.domain_id]), task, turns)[1]


def test_six_families_three_levels_and_opt_in() -> None:
    assert len(IDS) == 18 and {d.split("/")[2].split("@")[0] for d in IDS} == set(SPECS)
    assert not any(isinstance(e.family, ToolUseConfig) for e in DomainsConfig().domains)


@pytest.mark.parametrize("domain_id", IDS)
def test_gold_scores_one_on_twenty_tasks(domain_id: str) -> None:
    for index in range(20):
        task = task_of(domain_id, index)
        result = score(task, task.metadata[GOLD_TURNS])
        assert result.reward == 1.0 and result.passed, (task.id, result.details)
        assert result.details["completion"] == 1.0
        assert result.details["end_reason"] == "completed"


def test_every_domain_validates() -> None:
    pool = TaskPool(DomainRegistry([DomainEntry(family=ToolUseConfig())]), seed=1)
    for domain_id in pool.registry.ids():
        check = validate_domain(pool, domain_id, num_tasks=3)
        assert check.ok, check.failures


def test_generation_is_deterministic_and_seed_dependent() -> None:
    for domain_id in IDS:
        assert task_of(domain_id, 3) == task_of(domain_id, 3)
        other = FAMILY.task(DOMAINS[domain_id], 3, seed=6)
        assert other.gold != task_of(domain_id, 3).gold or other.prompt != task_of(domain_id, 3).prompt


def test_failure_schedule_never_fails_twice_in_a_row_and_hits_the_rate() -> None:
    for family in SPECS:
        api = Api(f"agent/tools/{family}@easy#0", {"state": {}}, 0.2)
        outcomes = []
        for _ in range(2000):
            try:
                api.gate()
                outcomes.append(False)
            except RuntimeError as exc:
                assert TRANSIENT in str(exc)
                outcomes.append(True)
        assert not any(a and b for a, b in zip(outcomes, outcomes[1:], strict=False))
        assert 0.16 < sum(outcomes) / len(outcomes) < 0.24, family
        assert api.failures == sum(outcomes)
    assert not fails_at("x", 0, 0.0)


@pytest.mark.parametrize("family", sorted(SPECS))
def test_each_family_injects_failures_and_a_retry_succeeds(family: str) -> None:
    calls = failures = 0
    for index in range(30):
        task = task_of(f"agent/tools/{family}@hard", index)
        result = score(task, task.metadata[GOLD_TURNS])
        calls += result.details["tool_calls"]
        failures += result.details["injected_failures"]
        assert result.details["tool_errors"] == result.details["injected_failures"]
        assert result.passed and result.details["recovered"] == bool(result.details["injected_failures"])
    assert 0.1 < failures / calls < 0.3, (failures, calls)


def test_a_transient_failure_is_a_clear_tool_message() -> None:
    task = next(t for t in (task_of("agent/tools/kv@easy", i) for i in range(50))
                if len(t.metadata[GOLD_TURNS]) == 3)  # fmt: skip
    env = FAMILY.environment(DOMAINS[task.domain_id])
    env.reset(task)
    first = env.step(task.metadata[GOLD_TURNS][0]).messages[0]["content"]
    assert "temporarily unavailable, retry" in first and first.startswith("Error:")
    assert "temporarily unavailable" not in env.step(task.metadata[GOLD_TURNS][0]).messages[0]["content"]


def test_no_failures_when_the_rate_is_zero() -> None:
    family = ToolUseFamily(ToolUseConfig(failure_rate=0.0))
    for domain_id in IDS:
        task = task_of(domain_id, 1, family)
        result = score(task, task.metadata[GOLD_TURNS], family)
        assert result.passed and result.details["injected_failures"] == 0
        assert len(task.metadata[GOLD_TURNS]) == len(task.gold["plan"]) + 1


def test_episodes_do_not_share_state() -> None:
    task = task_of("agent/tools/kv@hard", 2)
    first, second = (FAMILY.environment(DOMAINS[task.domain_id]) for _ in range(2))
    first.reset(task)
    second.reset(task)
    for turn in task.metadata[GOLD_TURNS]:
        first.step(turn)
    assert first.grade().passed and second.grade().reward == 0.0
    assert task.gold["state"] == task_of("agent/tools/kv@hard", 2).gold["state"]  # the task is untouched
    assert score(task, task.metadata[GOLD_TURNS]).passed  # and can be replayed


def test_concurrent_episodes_in_threads() -> None:
    tasks = [task_of(domain_id, i) for domain_id in IDS for i in range(2)]
    results: dict[str, Score] = {}

    def run(task: Task) -> None:
        results[task.id] = score(task, task.metadata[GOLD_TURNS])

    threads = [threading.Thread(target=run, args=(task,)) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == len(tasks) and all(s.passed for s in results.values())


def test_answer_listing_candidates_fails() -> None:
    for family in ("chain", "kv", "files", "calculator", "inventory"):
        task = task_of(f"agent/tools/{family}@easy", 0)
        calls = task.metadata[GOLD_TURNS][:-1]
        answer = task.gold["answer"]
        candidates = ", ".join(sorted({answer, "555-0000", "oak", "42", "buy milk"}))
        assert score(task, [*calls, f"Answer: {candidates}"]).reward < 1.0
        assert score(task, [*calls, f"Answer: {answer}\nAnswer: wrong"]).reward < 1.0
        assert score(task, [*calls, f"It is one of {candidates}."]).reward < 1.0
        assert score(task, [*calls, f"The value is:\n**Answer: {answer}.**"]).passed


def test_wrong_arguments_do_not_pass() -> None:
    task = task_of("agent/tools/calendar@easy", 0)
    ((name, args),) = task.gold["plan"]
    wrong = {**args, "hour": 9 if args["hour"] != 9 else 10}
    assert score(task, [format_tool_call(name, wrong)] * 2 + ["Done."]).reward < 1.0
    task = task_of("agent/tools/chain@medium", 0)
    turns = [format_tool_call("info", {"id": "p00", "field": "city"})] * 2 + [f"Answer: {task.gold['answer']}x"]
    assert score(task, turns).reward == 0.0


def test_claiming_success_without_calls_scores_zero() -> None:
    for domain_id in IDS:
        task = task_of(domain_id, 0)
        assert score(task, ["Done. All requested changes are made."]).reward == 0.0


def test_collateral_damage_costs_a_goal() -> None:
    task = task_of("agent/tools/files@medium", 0)
    victim = next(p for p in sorted(task.gold["state"]) if p != task.gold["plan"][0][1]["path"])
    vandal = [format_tool_call("write", {"path": victim, "text": "x"})] * 2
    result = score(task, [*task.metadata[GOLD_TURNS][:-1], *vandal, "Done."])
    assert result.details["collateral"] and not result.passed


@pytest.mark.parametrize("message", ["", "zzq ###", "x" * 1_000_000, "bad \udcff surrogate \ud800",
                                     "<tool_call>{not json</tool_call>", "<tool_call>"])  # fmt: skip
def test_bad_input_never_raises(message: str) -> None:
    for domain_id in ("agent/tools/files@hard", "agent/tools/calculator@medium"):
        result = score(task_of(domain_id, 0), [message, message])
        assert result.reward == 0.0 and not result.is_infra_failure


def test_endless_tool_calls_hit_the_limit() -> None:
    task = task_of("agent/tools/chain@hard", 0)
    spam = format_tool_call("find", {"name": "Nobody"}) * 10
    result = score(task, [spam] * 100)
    assert result.details["end_reason"] == MAX_TOOL_CALLS and result.reward == 0.0


def test_final_answer_reads_only_the_last_line() -> None:
    assert final_answer([{"role": "assistant", "content": "Answer: 3\nthanks"}]) is None
    assert final_answer([{"role": "assistant", "content": "ok\n answer:  7 "}]) == "7"
    assert final_answer([]) is None


def test_tool_schemas_are_short_and_few() -> None:
    for name, spec in SPECS.items():
        tools = tool_set(spec, Api("t", {"state": {}}, 0.0))
        assert 2 <= len(tools.tools) <= 4, name
        assert all(len(t.schema["function"]["description"]) < 60 for t in tools.tools), name
        assert tools.run(ToolCall("nope", {})).status.is_malformed


def test_gold_stays_within_six_calls() -> None:
    for domain_id in IDS:
        for index in range(10):
            assert len(task_of(domain_id, index).gold["plan"]) <= 6


def test_domain_specs() -> None:
    spec: DomainSpec = DOMAINS["agent/tools/chain@hard"]
    assert spec.size is None and spec.verifier == "environment" and spec.difficulty == 0.8
