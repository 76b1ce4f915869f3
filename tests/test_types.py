"""Core types: taxonomy parsing, content hashing, score attribution."""

from __future__ import annotations

import pytest

from posttrain.types import ChatMessage, ErrorKind, Score, Task, TaxonomyPath


def test_taxonomy_round_trip() -> None:
    path = TaxonomyPath.parse("math/arithmetic/add@hard")
    assert (path.cls, path.family, path.domain, path.level) == ("math", "arithmetic", "add", "hard")
    assert str(path) == "math/arithmetic/add@hard"


@pytest.mark.parametrize("bad", ["math/add", "a//b", "", "a/b/c/d"])
def test_taxonomy_rejects_malformed_ids(bad: str) -> None:
    with pytest.raises(ValueError):
        TaxonomyPath.parse(bad)


def test_content_hash_ignores_id_and_metadata() -> None:
    a = Task(id="x#1", domain_id="a/b/c", prompt="2+2?", gold="4", metadata={"k": 1})
    b = Task(id="y#9", domain_id="a/b/c", prompt="2+2?", gold="4")
    assert a.content_hash == b.content_hash


def test_content_hash_sees_gold() -> None:
    a = Task(id="x", domain_id="a/b/c", prompt="2+2?", gold="4")
    b = Task(id="x", domain_id="a/b/c", prompt="2+2?", gold="5")
    assert a.content_hash != b.content_hash


def test_chat_prompt_text_is_last_user_message() -> None:
    task = Task(
        id="x",
        domain_id="a/b/c",
        prompt=[ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hi")],
    )
    assert task.prompt_text() == "hi"


def test_infra_score_is_flagged_and_not_passed() -> None:
    score = Score.infra("sandbox crashed")
    assert score.is_infra_failure and not score.passed and score.error is ErrorKind.INFRA


def test_wrong_answer_is_a_model_failure() -> None:
    assert Score.wrong().error is ErrorKind.MODEL


def test_reward_must_be_finite() -> None:
    with pytest.raises(ValueError):
        Score(reward=float("nan"), passed=False)
