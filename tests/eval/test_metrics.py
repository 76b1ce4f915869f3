"""Cell metrics against values worked out by hand; the extractor tables against the verifiers' details."""

from __future__ import annotations

import math

import pytest

from posttrain.eval.agent_metrics import episode_metrics
from posttrain.eval.metrics import (
    BY_VERIFIER,
    CAD_DETAILS,
    Ratio,
    aggregate,
    pass_at_k,
    summarise,
    task_ratio_table,
)
from posttrain.eval.stats import bootstrap_ci, bootstrap_ratio_ci, mean_of_domains_ci
from posttrain.types import Score


def task_ratios(verifier: str, cls: str, greedy: list[Score], sampled: list[list[Score]], k: int) -> dict[str, list[Ratio]]:
    """`task_ratio_table` over tasks given by position, as plain lists of ratios."""
    table = task_ratio_table(verifier, cls, [(str(i), s) for i, s in enumerate(greedy)],
                             [(str(i), s) for i, s in enumerate(sampled)], k)  # fmt: skip
    return {name: list(ratios.values()) for name, ratios in table.items()}


def test_pass_at_k_is_the_unbiased_estimator_by_hand() -> None:
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)  # k=1 is c/n
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0  # k=n: any passing sample
    assert pass_at_k(5, 4, 2) == 1.0  # n - c < k: every k-subset holds a pass
    assert pass_at_k(2, 1, 3) == 1.0 and pass_at_k(2, 0, 3) == 0.0  # fewer graded than k: any passed
    assert math.isnan(pass_at_k(0, 0, 2))


def test_common_metrics_of_a_cell() -> None:
    greedy = [Score.correct(), Score.wrong(), Score.wrong(reward=0.5)]
    samples = [[Score.correct()] + [Score.wrong()] * 3, [Score.wrong()] * 4, [Score.correct()] * 4]
    ratios = task_ratios("numeric", "math", greedy, samples, k=2)
    metrics = summarise(ratios)
    assert metrics["pass@1"].value == pytest.approx(1 / 3) and metrics["pass@1"].n == 3
    assert metrics["reward"].value == pytest.approx(0.5)  # (1 + 0 + 0.5) / 3
    assert metrics["pass@1_sampled"].value == pytest.approx((0.25 + 0 + 1) / 3)
    assert metrics["pass@k"].value == pytest.approx((0.5 + 0 + 1) / 3)
    assert set(metrics) == {"pass@1", "reward", "pass@1_sampled", "pass@k"}  # no extra metric for `numeric`
    assert "pass@k" not in task_ratios("numeric", "math", greedy, [], k=2)  # greedy only


def test_knowledge_cad_and_code_metrics_come_from_the_details() -> None:
    cited = Score.correct(accuracy=1.0, citation_precision=0.5, citation_recall=1.0, citation_support=0.0,
                          num_cited=2)  # fmt: skip
    uncited = Score.wrong(accuracy=1.0, citation_precision=0.0, citation_recall=0.0, citation_support=1.0,
                          num_cited=0)  # fmt: skip
    knowledge = summarise(task_ratios("citations", "knowledge", [cited, uncited], [], k=1))
    assert knowledge["accuracy"].value == 1.0 and knowledge["citation_precision"].value == 0.25
    # support counts responses that cite: the uncited one's vacuous 1.0 is left out
    assert knowledge["citation_support"].value == 0.0 and knowledge["citation_support"].n == 1
    cad = summarise(task_ratios("cad_geometry", "3d", [Score.wrong(0.4, compiles=1.0, manifold=1.0, volume=0.5, bbox=1.0,
                                                                     features=0.0, voids=1.0, iou=0.2)], [], k=1))  # fmt: skip
    assert {name: cad[name].value for name in CAD_DETAILS} == {"compiles": 1.0, "manifold": 1.0, "volume": 0.5,
                                                               "bbox": 1.0, "features": 0.0, "voids": 1.0, "iou": 0.2}  # fmt: skip
    # tests_passed is the mean of per-task shares: (3/4 + 0/2) / 2, not the pooled 3/6
    code = [Score.wrong(tests_passed=3, tests_total=4), Score.wrong(tests_passed=0, tests_total=2)]
    assert summarise(task_ratios("code_tests", "code", code, [], k=1))["tests_passed"].value == pytest.approx(0.375)
    terminal = summarise(task_ratios("environment", "terminal", [Score.correct(), Score.wrong()], [], k=1))
    assert terminal["tests_passed"].value == 0.5


def test_cad_metric_names_are_the_verifiers_gates_and_sub_scores() -> None:
    from posttrain.verify.cad_score import GATES, SUB_SCORES

    assert CAD_DETAILS == GATES + SUB_SCORES


def _episode(reward: float, calls: int, ok: int, errors: int, completion: float | None = None) -> Score:
    details = {"turns": 2, "tool_calls": calls, "tool_calls_ok": ok, "tool_errors": errors, "malformed_calls": 0,
               "recovered": 0, "end_reason": "submitted"}  # fmt: skip
    if completion is not None:
        details["completion"] = completion
    return Score(reward=reward, passed=reward == 1.0, details=details)


def test_episode_metrics_match_agent_metrics() -> None:
    from posttrain.envs.base import EPISODE_METRICS

    episodes = [_episode(1.0, 4, 3, 1), _episode(0.0, 2, 2, 0, 0.5), _episode(0.5, 0, 0, 0), _episode(0.0, 3, 1, 2)]
    assert all(set(EPISODE_METRICS) <= set(e.details) for e in episodes)
    ours = summarise(task_ratios("environment", "agent", episodes, [], k=1))
    theirs = episode_metrics(episodes)
    assert ours["success"].value == pytest.approx(theirs["success_rate"])
    assert ours["completion"].value == pytest.approx(theirs["completion"])
    assert ours["tool_call_success"].value == pytest.approx(theirs["tool_call_success"])  # 6/9, pooled
    assert ours["tool_call_success"].n == 3  # episodes with a tool call
    assert ours["recovery"].value == pytest.approx(theirs["recovery_rate"]) and ours["recovery"].n == 2
    assert "success" not in task_ratios("environment", "agent", [Score.correct()], [], k=1)  # not an episode


def test_sampled_episode_metrics_pool_each_tasks_samples() -> None:
    # task a: one errored sample passed, one errored failed, one clean passed; task b: no error at all
    samples = [[_episode(1.0, 2, 1, 1), _episode(0.0, 3, 1, 2), _episode(1.0, 1, 1, 0)],
               [_episode(0.0, 1, 1, 0), _episode(0.0, 0, 0, 0)]]  # fmt: skip
    metrics = summarise(task_ratios("environment", "agent", [_episode(0.0, 1, 1, 0)] * 2, samples, k=1))
    assert metrics["recovery_sampled"].value == 0.5 and metrics["recovery_sampled"].n == 1  # 1 of a's 2 errored
    assert metrics["success_sampled"].value == pytest.approx(2 / 5)  # pooled over samples (tasks had 3 and 2)
    assert metrics["tool_call_success_sampled"].value == pytest.approx(4 / 7)  # pooled over every call
    assert "recovery" not in metrics  # no greedy episode hit an error
    assert "success_sampled" not in task_ratios("numeric", "math", [Score.correct()], [[Score.correct()]], k=1)


def test_ratio_interval_equals_the_mean_interval_for_unit_denominators() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5]
    assert bootstrap_ratio_ci(values, [1.0] * len(values)) == bootstrap_ci(values)
    assert all(math.isnan(x) for x in bootstrap_ratio_ci([], []))
    assert bootstrap_ratio_ci([1.0, 2.0], [2.0, 4.0]) == (0.5, 0.5)  # every resample pools to 1/2


def test_aggregate_is_the_mean_of_domain_means() -> None:
    small = {"pass@1": [(1.0, 1.0), (1.0, 1.0)], "reward": [(1.0, 1.0), (1.0, 1.0)]}
    large = {"pass@1": [(0.0, 1.0)] * 8, "reward": [(0.0, 1.0)] * 8, "accuracy": [(1.0, 1.0)] * 8}
    result = aggregate([small, large])
    assert result["pass@1"].value == 0.5  # not the pooled 2/10
    assert result["pass@1"].n == 10 and "accuracy" not in result
    assert (result["pass@1"].ci_low, result["pass@1"].ci_high) == (0.5, 0.5)  # each domain is constant
    assert mean_of_domains_ci([[0.0, 1.0], [1.0]]) == mean_of_domains_ci([[0.0, 1.0], [1.0]])


def test_metrics_serialise_without_nan() -> None:
    metric = summarise({"x": [(1.0, 0.0)]})["x"]
    assert metric.to_dict()["value"] is None and metric.n == 0
    assert set(BY_VERIFIER["citations"]) == {"accuracy", "citation_precision", "citation_recall", "citation_support"}
