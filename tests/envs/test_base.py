"""The environment contract: scripted gold, limits, isolation, recovery, single-turn adapter, bad input."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from posttrain.envs.base import (
    EPISODE_METRICS,
    Environment,
    EpisodeLimits,
    SingleTurnEnv,
    ToolEnv,
    run_policy,
    run_scripted,
)
from posttrain.envs.example import (
    KVStore,
    grade_kv,
    kv_env,
    kv_gold_policy,
    kv_gold_turns,
    kv_tools,
    make_kv_task,
)
from posttrain.envs.tools import MAX_RESULT_CHARS, Tool, ToolSet
from posttrain.types import ErrorKind, Score, Task
from posttrain.verify.tool_calls import format_tool_call

TASKS = [make_kv_task(i) for i in range(8)]
LIST = format_tool_call("list_keys", {})


def test_environments_satisfy_the_protocol() -> None:
    assert isinstance(kv_env(), Environment)
    assert isinstance(SingleTurnEnv(lambda task, response: Score.correct()), Environment)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_scripted_gold_scores_one_with_episode_metrics(task: Task) -> None:
    transcript, score = run_scripted(kv_env(), task, kv_gold_turns(task))
    assert score.reward == 1.0 and score.passed
    assert set(EPISODE_METRICS) <= set(score.details)
    assert score.details["end_reason"] == "completed"
    assert (score.details["turns"], score.details["tool_calls"], score.details["tool_errors"]) == (5, 3, 0)
    assert score.details["recovered"] is False
    assert [m["role"] for m in transcript] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                              "assistant", "user", "assistant", "tool", "assistant"]  # fmt: skip


def test_running_out_of_scripted_turns_ends_the_episode_and_grades_what_was_done() -> None:
    task = TASKS[0]
    _, score = run_scripted(kv_env(), task, kv_gold_turns(task)[:3])
    assert score.details["end_reason"] == "policy_out_of_turns"
    assert not score.passed and score.reward == pytest.approx(2 / 3)  # stored and reported, not deleted


def test_empty_script_and_garbage_score_zero_without_raising() -> None:
    task = TASKS[1]
    assert run_scripted(kv_env(), task, [])[1].reward == 0.0
    _, score = run_scripted(kv_env(), task, ["\x00\ufffd garbage", "<tool_call>{not json", "</tool_call>"])
    assert score.reward < 1 and not score.passed


@pytest.mark.parametrize("rate", [0.3, 0.6])
def test_injected_failures_are_retried_by_the_gold_policy_and_counted_as_recovery(rate: float) -> None:
    recovered = 0
    for task in TASKS:
        _, score = run_policy(kv_env(rate, EpisodeLimits(max_turns=64)), task, kv_gold_policy(task))
        assert score.passed, score.details
        assert score.details["tool_errors"] == score.details["injected_failures"]
        assert score.details["malformed_calls"] == 0
        assert score.details["recovered"] is (score.details["tool_errors"] > 0)
        recovered += score.details["recovered"]
    assert recovered > 0  # at these rates some of 8 episodes must hit a failure


def test_failures_replay_identically_for_the_same_task() -> None:
    task = TASKS[2]
    first = run_policy(kv_env(0.5, EpisodeLimits(max_turns=64)), task, kv_gold_policy(task))
    again = run_policy(kv_env(0.5, EpisodeLimits(max_turns=64)), task, kv_gold_policy(task))
    assert first == again


def test_a_model_error_that_is_fixed_counts_as_recovery() -> None:
    task = TASKS[3]
    bad = format_tool_call("set", {"key": 1})  # wrong type and a missing argument
    _, score = run_scripted(kv_env(), task, [bad, *kv_gold_turns(task)])
    assert score.passed and score.details["recovered"] is True
    assert (score.details["malformed_calls"], score.details["tool_calls_ok"]) == (1, 3)


@pytest.mark.parametrize(("limits", "turns", "reason"), [
    (EpisodeLimits(max_turns=3), [LIST] * 10, "max_turns"),
    (EpisodeLimits(max_tool_calls=4), [LIST * 3] * 5, "max_tool_calls"),
    (EpisodeLimits(max_length=2000), [LIST] * 50, "max_length"),
    (EpisodeLimits(max_length=100, count_tokens=lambda text: len(text.split())), [LIST] * 50, "max_length"),
])  # fmt: skip
def test_each_limit_ends_the_episode_with_its_reason(limits: EpisodeLimits, turns: list[str], reason: str) -> None:
    env = kv_env(limits=limits)
    transcript, score = run_scripted(env, TASKS[0], turns)
    assert score.details["end_reason"] == reason
    assert score.details["turns"] < len(turns)  # ended before the script did
    if reason == "max_tool_calls":
        assert score.details["tool_calls"] == 4
    if reason == "max_turns":
        assert score.details["turns"] == 3


def test_step_after_done_changes_nothing() -> None:
    env = kv_env(limits=EpisodeLimits(max_turns=1))
    env.reset(TASKS[0])
    assert env.step(LIST).done
    again = env.step(LIST)
    assert again.done and again.messages == [] and again.end_reason == "max_turns"
    assert env.grade().details["tool_calls"] == 1


def test_successive_episodes_of_one_env_start_from_fresh_state() -> None:
    env, task = kv_env(), TASKS[4]
    run_scripted(env, task, [format_tool_call("set", {"key": "leak", "value": "x"})])
    transcript, _ = run_scripted(env, task, [format_tool_call("get", {"key": "leak"})])
    assert "no key 'leak'" in transcript[-1]["content"]


def test_concurrent_episodes_of_the_same_env_do_not_share_state() -> None:
    base, task = kv_env(), TASKS[5]
    barrier = threading.Barrier(2)

    def episode(value: str) -> str:
        env = base.fresh()
        env.reset(task)
        env.step(format_tool_call("set", {"key": "shared", "value": value}))
        barrier.wait(10)  # both have written before either reads
        return env.step(format_tool_call("get", {"key": "shared"})).messages[0]["content"]

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(episode, ["one", "two"])) == ["one", "two"]


def test_a_grader_that_raises_is_an_infra_failure() -> None:
    def broken(state: object, transcript: object) -> Score:
        raise RuntimeError("bug")

    env = ToolEnv(lambda task: kv_tools(KVStore(task.gold["initial"])), broken)
    _, score = run_scripted(env, TASKS[0], ["hello"])
    assert score.error is ErrorKind.INFRA and "RuntimeError: bug" in score.message
    assert score.details["end_reason"] == "policy_out_of_turns"


def test_a_tool_that_hangs_in_an_episode_times_out_and_the_episode_continues() -> None:
    release = threading.Event()

    def wait() -> str:
        """Waits."""
        release.wait(30)
        return "late"

    def make(task: Task) -> ToolSet:
        store = KVStore(task.gold["initial"], goal=task.gold)
        return ToolSet([*kv_tools(store).tools, Tool.from_function(wait)], state=store)

    task = TASKS[6]
    env = ToolEnv(make, grade_kv, limits=EpisodeLimits(tool_timeout_s=0.1))
    transcript, score = run_scripted(env, task, [format_tool_call("wait", {}), *kv_gold_turns(task)])
    release.set()
    assert "timed out after 0.1 s" in transcript[3]["content"]
    assert score.passed and score.details["recovered"] is True


def test_single_turn_env_is_one_step_graded_by_the_domain() -> None:
    def grade(task: Task, response: str) -> Score:
        return Score.correct() if response.strip() == task.answer else Score.wrong()

    task = Task(id="math/x#0", domain_id="math/x", prompt="1+1?", answer="2")
    transcript, score = run_scripted(SingleTurnEnv(grade), task, ["2", "ignored"])
    assert transcript == [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]
    assert score.passed and score.details["turns"] == 1 and score.details["end_reason"] == "completed"
    assert not run_scripted(SingleTurnEnv(grade), task, ["3"])[1].passed
    assert run_scripted(SingleTurnEnv(grade), task, [])[1].details["end_reason"] == "policy_out_of_turns"


HOSTILE = [
    "",
    "x" * 1_000_000,
    "\ud800\udfff lone surrogates \udc80",
    "<tool_call>" * 10_000,
    format_tool_call("set", {"key": "k", "value": "v" * 1_000_000}),
    "".join(format_tool_call("list_keys", {}) for _ in range(1000)),
    '<tool_call>{"name": "get", "arguments": {"key": ' + "[" * 100_000 + "}</tool_call>",
    bytes(range(256)).decode("latin-1"),
]


@pytest.mark.parametrize("message", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_messages_never_crash_the_episode(message: str) -> None:
    transcript, score = run_scripted(kv_env(), TASKS[7], [message] * 3 + kv_gold_turns(TASKS[7]))
    assert set(EPISODE_METRICS) <= set(score.details)
    for m in transcript:
        m["content"].encode("utf-8")  # every message is valid UTF-8
    assert all(len(m["content"]) <= MAX_RESULT_CHARS + 100 for m in transcript if m["role"] == "tool")
    assert score.details["turns"] <= EpisodeLimits().max_turns


def test_endless_tool_calls_are_bounded_by_the_call_limit() -> None:
    many = "".join(format_tool_call("list_keys", {}) for _ in range(100))
    _, score = run_scripted(kv_env(limits=EpisodeLimits(max_tool_calls=40)), TASKS[0], [many] * 100)
    assert score.details["end_reason"] == "max_tool_calls" and score.details["tool_calls"] == 40


def test_the_env_transcript_is_what_the_policy_was_shown() -> None:
    for max_length in (200_000, 1950, 2000):  # 2000: a tool message crosses the limit
        env = kv_env(limits=EpisodeLimits(max_length=max_length))
        transcript, score = run_scripted(env, TASKS[2], [LIST] * 3 + kv_gold_turns(TASKS[2]))
        assert transcript == env.transcript
        assert score.details["end_reason"] == ("completed" if max_length == 200_000 else "max_length")
