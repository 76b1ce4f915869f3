"""Math equivalence via math-verify, in the main thread and from other threads."""

from __future__ import annotations

import threading

import pytest

from posttrain.types import ErrorKind, Score
from posttrain.verify import MathConfig, build_verifier
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


def test_scoring_from_a_thread_goes_through_a_worker() -> None:
    verifier = build_verifier(MathConfig())
    scores: list[Score] = []
    thread = threading.Thread(target=lambda: scores.append(verifier.score(make_task("1/2"), "$0.5$")))
    thread.start()
    thread.join(timeout=120)
    assert [s.passed for s in scores] == [True]
