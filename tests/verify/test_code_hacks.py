"""Responses that try to game `code_tests` (`posttrain.bench.code_hacks.HACKS`): each must score 0 as a
model failure (never infra) on every problem, while the canonical solution of the same problem passes."""

from __future__ import annotations

from typing import Any

import pytest

from posttrain.bench.code_hacks import HACKS, canonical
from posttrain.types import ErrorKind, Score
from posttrain.verify.code import CodeTestsVerifier
from posttrain.verify.configs import CodeTestsConfig
from tests.verify.code_fixtures import (
    SAMPLE,
    humaneval_task,
    problems,
    requires_bwrap,
    verifier,  # noqa: F401 - a fixture
)

pytestmark = requires_bwrap


def grade_all(verifier: CodeTestsVerifier, names: list[str]) -> dict[tuple[str, str], Score]:  # noqa: F811
    makers = {"canonical": canonical, **HACKS}
    keys = [(name, hack) for name in names for hack in makers]
    items = [(humaneval_task(problems()[name]), makers[hack](problems()[name])) for name, hack in keys]
    return dict(zip(keys, verifier.score_many(items), strict=True))


@pytest.fixture(scope="module")
def scores(verifier: CodeTestsVerifier) -> dict[tuple[str, str], Score]:  # noqa: F811
    return grade_all(verifier, list(SAMPLE))


def test_the_canonical_solutions_pass(scores: dict[tuple[str, str], Score]) -> None:
    for name in SAMPLE:
        assert scores[(name, "canonical")].passed, scores[(name, "canonical")]


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_the_hack_scores_zero_as_the_models_failure(hack: str, scores: dict[tuple[str, str], Score]) -> None:
    for name in SAMPLE:
        score = scores[(name, hack)]
        assert (score.reward, score.passed, score.error) == (0.0, False, ErrorKind.MODEL), (name, score)


def _secret(problem: dict[str, Any]) -> str:
    return next(line.strip() for line in problem["test"].splitlines() if line.strip().startswith("assert"))


@pytest.mark.parametrize(("hack", "plant"), [
    ("leak_own_objects", "_PLANTED = {secret!r}"),
    ("leak_files", "open('/tmp/planted.txt', 'w').write({secret!r})"),
])  # fmt: skip
def test_the_leak_hacks_would_see_a_secret_that_is_there(
    hack: str, plant: str, verifier: CodeTestsVerifier  # noqa: F811
) -> None:
    """The leak hacks are real detectors: with the secret planted where they look, they pass."""
    problem = problems()[SAMPLE[0]]
    response = HACKS[hack](problem).replace("\nif not _found(", "\n" + plant.format(secret=_secret(problem)) + "\nif not _found(")
    assert verifier.score(humaneval_task(problem), response).passed


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 164 x 25 runs, 656 of them hanging for the whole 2 s budget (425 s at load 25-60)
def test_no_hack_passes_any_humaneval_problem() -> None:
    every = CodeTestsVerifier(CodeTestsConfig(timeout_s=2.0))
    try:
        scores = grade_all(every, sorted(problems()))
    finally:
        every.close()
    failed_canonical = [name for (name, hack), s in scores.items() if hack == "canonical" and not s.passed]
    gamed = [(name, hack) for (name, hack), s in scores.items()
             if hack != "canonical" and (s.reward != 0.0 or s.error is not ErrorKind.MODEL)]  # fmt: skip
    assert failed_canonical == [] and gamed == []
