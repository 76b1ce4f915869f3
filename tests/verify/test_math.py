"""Math equivalence via math-verify, in the main thread and from other threads."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from posttrain.types import ErrorKind, Score
from posttrain.verify import ExactConfig, ExecutorConfig, Grader, MathConfig, build_verifier
from tests.verify.factories import make_task


@pytest.mark.parametrize(
    ("gold", "response"),
    [
        ("\\frac{1}{2}", "0.5"),
        ("0.5", "The answer is $\\frac{1}{2}$."),
        ("\\sqrt{2}", "\\boxed{1.41421356}"),
        ("(x+1)^2", "$x^2 + 2x + 1$"),
        ("42", "The answer is \\boxed{42}"),
        (3, "3"),
        ("\\{1, 2\\}", "$\\{2, 1\\}$"),
    ],
)
def test_equivalent_forms_pass(gold: object, response: str) -> None:
    score = build_verifier(MathConfig()).score(make_task(gold), response)
    assert (score.reward, score.passed) == (1.0, True)


@pytest.mark.parametrize(
    ("gold", "response"), [("\\frac{1}{2}", "0.6"), ("x^2", "$x^3$"), ("42", "\\boxed{24}")]
)
def test_different_values_fail(gold: str, response: str) -> None:
    score = build_verifier(MathConfig()).score(make_task(gold), response)
    assert (score.passed, score.error) == (False, ErrorKind.MODEL)


@pytest.mark.parametrize("response", ["", "zzqx garbage", "\ud800"])
def test_empty_and_garbage_fail_as_model(response: str) -> None:
    score = build_verifier(MathConfig()).score(make_task("42"), response)
    assert (score.reward, score.error) == (0.0, ErrorKind.MODEL)


@pytest.mark.parametrize("gold", ["", "\\frac{", None])
def test_unparsable_gold_is_infra(gold: object) -> None:
    score = build_verifier(MathConfig()).score(make_task(gold), "42")
    assert score.error is ErrorKind.INFRA


def _in_thread(fn: Callable[[], list[Score]]) -> list[Score]:
    scores: list[Score] = []
    thread = threading.Thread(target=lambda: scores.extend(fn()))
    thread.start()
    thread.join(timeout=120)
    return scores


def test_direct_scoring_off_the_main_thread_is_infra_not_a_crash() -> None:
    verifier = build_verifier(MathConfig())
    scores = _in_thread(lambda: [verifier.score(make_task("1/2"), "$0.5$")])
    assert [s.error for s in scores] == [ErrorKind.INFRA]


def test_inline_grader_sends_main_thread_verifiers_off_a_thread_to_a_worker() -> None:
    configs = {"math/x/a": MathConfig(), "math/x/b": ExactConfig()}
    tasks = [make_task("1/2", domain_id="math/x/a"), make_task("7", domain_id="math/x/b")]
    with Grader(configs.__getitem__, ExecutorConfig(num_workers=0)) as grader:
        scores = _in_thread(lambda: grader.grade([(tasks[0], "$0.5$"), (tasks[1], "7"), (tasks[0], "0.6")]))
        assert grader._main_thread_pool is not None  # started because the thread could not score math
    assert [s.passed for s in scores] == [True, True, False]
    assert all(s.error is not ErrorKind.INFRA for s in scores)


def test_inline_grader_on_the_main_thread_starts_no_worker() -> None:
    with Grader(lambda _: MathConfig(), ExecutorConfig(num_workers=0)) as grader:
        assert grader.grade([(make_task("1/2"), "$0.5$")])[0].passed
        assert grader._main_thread_pool is None
