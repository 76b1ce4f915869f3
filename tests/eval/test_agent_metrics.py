"""Episode metrics: hand-built episodes with expectations worked out in comments, and real KV episodes."""

from __future__ import annotations

import math
from typing import Any

import pytest

from posttrain.envs.base import MAX_TURNS, OUT_OF_TURNS, EpisodeLimits, run_policy, run_scripted
from posttrain.envs.example import kv_env, kv_gold_policy, kv_gold_turns, make_kv_task
from posttrain.eval.agent_metrics import episode_metrics, episode_step_metrics, is_episode
from posttrain.eval.evaluate import DomainEval, summarise
from posttrain.eval.sampled import SampledEval, summarise_sampled
from posttrain.types import Score, Task


def episode(reward: float, calls: int = 0, ok: int = 0, malformed: int = 0, turns: int = 1,
            end: str = "completed", **extra: Any) -> Score:  # fmt: skip
    details = {"turns": turns, "tool_calls": calls, "tool_calls_ok": ok, "tool_errors": calls - ok,
               "malformed_calls": malformed, "recovered": bool(calls - ok and reward == 1.0),
               "end_reason": end, **extra}  # fmt: skip
    return Score(reward=reward, passed=reward == 1.0, details=details)


def test_aggregates_match_hand_computed_values() -> None:
    scores = [
        episode(1.0, calls=4, ok=3, turns=5, completion=1.0),  # errored and passed: recovered
        episode(1.0, calls=2, ok=2, turns=3, completion=1.0),
        episode(0.5, calls=3, ok=1, malformed=1, turns=4, end=MAX_TURNS, completion=2 / 3),  # errored, failed
        episode(0.0, turns=2, end=OUT_OF_TURNS),  # no completion key: falls back to the reward
        Score.infra("sandbox died", **episode(0.0).details),
    ]
    m = episode_metrics(scores)
    assert m["episodes"] == 4 and m["infra_failures"] == 1
    assert m["success_rate"] == 0.5  # 2 of 4 have reward 1.0
    assert m["completion"] == pytest.approx((1 + 1 + 2 / 3 + 0) / 4)
    assert m["tool_call_success"] == 6 / 9  # (3 + 2 + 1) ok of (4 + 2 + 3) calls
    assert m["errored_episodes"] == 2 and m["recovery_rate"] == 0.5  # 1 of the 2 errored episodes passed
    assert m["turns_per_episode"] == 14 / 4 and m["tool_calls_per_episode"] == 9 / 4
    assert m["malformed_per_episode"] == 1 / 4
    assert (m["end_reason/completed"], m["end_reason/max_turns"], m["end_reason/policy_out_of_turns"]) == (
        2,
        1,
        1,
    )
    assert m["success_rate_ci_low"] <= 0.5 <= m["success_rate_ci_high"]
    assert 0.0 <= m["recovery_rate_ci_low"] <= m["recovery_rate_ci_high"] <= 1.0


def test_ratios_without_a_denominator_are_omitted_not_nan() -> None:
    m = episode_metrics([episode(1.0), episode(0.0)])  # no tool call, no error
    assert "tool_call_success" not in m and "recovery_rate" not in m and "recovery_rate_ci_low" not in m
    assert m["errored_episodes"] == 0
    assert all(not math.isnan(v) for v in m.values())


def test_reward_below_one_is_not_a_success_even_when_passed() -> None:
    almost = Score(reward=0.99, passed=True, details=episode(0.99).details)
    assert episode_metrics([almost])["success_rate"] == 0.0


def test_single_turn_scores_are_not_episodes() -> None:
    plain = [Score.correct(), Score.wrong(), Score.infra("x")]
    assert not any(is_episode(s) for s in plain)
    assert episode_metrics(plain) == {}
    assert episode_metrics([Score.infra("x", **episode(0.0).details)]) == {}  # only infra: nothing graded
    assert episode_step_metrics([("math/arithmetic/add@easy", s) for s in plain]) == {}


def test_real_kv_episodes_gold_partial_and_recovered() -> None:
    tasks = [make_kv_task(i) for i in range(3)]
    gold = run_scripted(kv_env(), tasks[0], kv_gold_turns(tasks[0]))[1]
    partial = run_scripted(kv_env(), tasks[1], kv_gold_turns(tasks[1])[:2])[1]  # stored, never reported
    flaky = kv_env(failure_rate=0.5)
    recovered = run_policy(flaky, tasks[2], kv_gold_policy(tasks[2]))[1]
    assert recovered.details["tool_errors"] > 0 and recovered.passed  # the gold policy retries
    m = episode_metrics([gold, partial, recovered])
    assert m["success_rate"] == 2 / 3 and m["completion"] == pytest.approx((1 + 1 / 3 + 1) / 3)
    assert m["recovery_rate"] == 1.0 and m["errored_episodes"] == 1
    assert m["end_reason/policy_out_of_turns"] == 1 and m["end_reason/completed"] == 2
    assert (
        partial.details["end_reason"] == "policy_out_of_turns" and gold.details["end_reason"] == "completed"
    )


def test_step_metrics_are_keyed_by_metric_then_domain_without_intervals() -> None:
    kv, other = "agent/example/kv", "agent/example/other"
    scored = [(kv, episode(1.0, calls=1, ok=1)), (kv, episode(0.0, calls=1, ok=0)), (other, episode(0.0)),
              ("math/arithmetic/add@easy", Score.correct())]  # fmt: skip
    m = episode_step_metrics(scored)
    assert m[f"agent/success_rate/{kv}"] == 0.5 and m[f"agent/tool_call_success/{kv}"] == 0.5
    assert m[f"agent/recovery_rate/{kv}"] == 0.0 and m[f"agent/success_rate/{other}"] == 0.0
    assert not any("ci_" in key or key.endswith("add@easy") for key in m)
    assert f"agent/tool_call_success/{other}" not in m


def test_turn_limit_ends_episode_with_its_reason() -> None:
    task = make_kv_task(4)
    env = kv_env(limits=EpisodeLimits(max_turns=2))
    score = run_scripted(env, task, kv_gold_turns(task))[1]
    assert episode_metrics([score])["end_reason/max_turns"] == 1


def test_greedy_eval_of_an_agent_domain_carries_its_episode_metrics() -> None:
    kv_tasks = [make_kv_task(i) for i in range(2)]
    add = Task(id="math/arithmetic/add@easy#0", domain_id="math/arithmetic/add@easy", prompt="1+1", answer="2")
    scores = [run_scripted(kv_env(), t, kv_gold_turns(t)[: 5 - 3 * i])[1] for i, t in enumerate(kv_tasks)]
    result = summarise([*kv_tasks, add], [*scores, Score.correct()], [10, 10, 1], ["agent/example/kv", add.domain_id])
    agent = result["agent/example/kv"].agent
    assert agent["success_rate"] == 0.5 and agent["completion"] == pytest.approx((1 + 1 / 3) / 2)
    assert result[add.domain_id].agent == {} and "agent" not in result[add.domain_id].to_dict()
    data = result["agent/example/kv"].to_dict()
    assert DomainEval.from_dict(data) == result["agent/example/kv"]  # survives the eval file


def test_sampled_eval_aggregates_every_sample() -> None:
    task = make_kv_task(0)
    gold = run_scripted(kv_env(), task, kv_gold_turns(task))[1]
    empty = run_scripted(kv_env(), task, [])[1]
    result = summarise_sampled(task.domain_id, 2, [(task, [gold, empty])])
    assert result.pass_at_1 == 0.5 and result.agent["episodes"] == 2 and result.agent["success_rate"] == 0.5
    assert SampledEval.from_dict(result.to_dict()) == result
    assert "agent" not in summarise_sampled("a/b/c", 1, [(task, [Score.correct()])]).to_dict()
