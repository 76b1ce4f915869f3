"""Exact, normalised and numeric verifiers: gold passes, empty/garbage fail, tolerance and parsing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from posttrain.types import ErrorKind
from posttrain.verify import ExactConfig, NormalizedConfig, NumericConfig, build_verifier
from posttrain.verify.text import normalize, parse_number
from tests.verify.factories import make_task

CONFIGS = [ExactConfig(), NormalizedConfig(), NumericConfig()]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
@pytest.mark.parametrize("answer", ["42", "The answer is \\boxed{42}", "work\n#### 42", "Answer: 42"])
def test_gold_response_scores_one(config: object, answer: str) -> None:
    score = build_verifier(config).score(make_task("42", answer), answer)  # type: ignore[arg-type]
    assert (score.reward, score.passed, score.error) == (1.0, True, ErrorKind.NONE)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
@pytest.mark.parametrize("response", ["", "   \n", "zzqx garbage", "\ud800\udc00\ud800", "\\boxed{"])
def test_empty_and_garbage_are_model_failures(config: object, response: str) -> None:
    score = build_verifier(config).score(make_task("42"), response)  # type: ignore[arg-type]
    assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.kind)
def test_missing_gold_is_an_infra_failure(config: object) -> None:
    score = build_verifier(config).score(make_task(None), "42")  # type: ignore[arg-type]
    assert score.error is ErrorKind.INFRA


def test_list_gold_accepts_any_reference() -> None:
    verifier = build_verifier(NormalizedConfig())
    assert verifier.score(make_task(["Paris", "paris, france"]), "Answer: Paris, France.").passed


def test_exact_is_case_sensitive() -> None:
    assert not build_verifier(ExactConfig()).score(make_task("Yes"), "yes").passed


@pytest.mark.parametrize(
    ("gold", "response"),
    [("Yes", "  **yes.** "), ("New York", "new   york"), ("x", "\\text{X}"), ("ﬁne", "fine")],
)
def test_normalized_matches_cosmetic_variants(gold: str, response: str) -> None:
    assert build_verifier(NormalizedConfig(extract="none")).score(make_task(gold), response).passed


def test_normalized_case_sensitive_option() -> None:
    config = NormalizedConfig(extract="none", case_sensitive=True)
    assert not build_verifier(config).score(make_task("Yes"), "yes").passed


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", Fraction(42)),
        ("-7", Fraction(-7)),
        ("3.25", Fraction(13, 4)),
        ("3/4", Fraction(3, 4)),
        ("-3 / 4", Fraction(-3, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("-\\dfrac{1}{2}", Fraction(-1, 2)),
        ("1,234,567", Fraction(1234567)),
        ("$1,234.50", Fraction(246900, 200)),
        ("50%", Fraction(50)),
        ("1e-3", Fraction(1, 1000)),
        (".5", Fraction(1, 2)),
        ("1,23", None),
        ("1/0", None),
        ("1e99999", None),
        ("9" * 300, None),
        ("forty", None),
        ("nan", None),
    ],
)
def test_parse_number(text: str, value: Fraction | None) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("gold", "response", "passed"),
    [
        ("0.75", "3/4", True),
        ("3/4", "\\boxed{0.75}", True),
        ("1234", "It costs $1,234.", True),
        ("-5", "Answer: -5", True),
        ("5", "Answer: -5", False),
        ("1", "1.0000000001", True),  # within rel_tol 1e-6
        ("1", "1.001", False),
        ("0.333333333", "1/3", True),
        ("42", "Answer: 42 apples", True),
        ("42", "the total is 42.\n\nHope that helps!", True),
        (7, "7", True),
    ],
)
def test_numeric_tolerance_and_forms(gold: object, response: str, passed: bool) -> None:
    assert build_verifier(NumericConfig()).score(make_task(gold), response).passed is passed


def test_numeric_custom_tolerance() -> None:
    loose = NumericConfig(rel_tol=0.01)
    assert build_verifier(loose).score(make_task("100"), "100.5").passed


def test_non_numeric_gold_is_infra() -> None:
    score = build_verifier(NumericConfig()).score(make_task("blue"), "42")
    assert score.error is ErrorKind.INFRA


def test_normalize_collapses_whitespace_and_case() -> None:
    assert normalize("  Hello \n  World! ") == "hello world"
