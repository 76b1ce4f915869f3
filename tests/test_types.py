"""Core types: taxonomy parsing, content hashing, score attribution."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from posttrain.types import ChatMessage, ErrorKind, Group, Score, Task, TaxonomyPath, Trajectory


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


def _task() -> Task:
    return Task(id="a/b/c#0", domain_id="a/b/c", prompt="q")


def test_single_turn_trajectory_masks_only_the_response() -> None:
    traj = Trajectory.single_turn(_task(), [5, 6, 7], [8, 9], [-0.5, -1.0], "89", policy_version=3)
    assert traj.token_ids == (5, 6, 7, 8, 9)
    assert traj.loss_mask == (0, 0, 0, 1, 1)
    assert traj.logprobs == (0.0, 0.0, 0.0, -0.5, -1.0)
    assert (traj.prompt_length, traj.num_policy_tokens, traj.policy_version) == (3, 2, 3)


def test_trajectory_rejects_misaligned_or_non_binary_masks() -> None:
    with pytest.raises(ValueError, match="one entry per token"):
        Trajectory(task=_task(), token_ids=(1, 2), loss_mask=(0,), logprobs=(0.0, 0.0), response="")
    with pytest.raises(ValueError, match="0 or 1"):
        Trajectory(task=_task(), token_ids=(1, 2), loss_mask=(0, 2), logprobs=(0.0, 0.0), response="")


def test_records_are_frozen() -> None:
    traj = Trajectory.single_turn(_task(), [1], [2], [-0.1], "2")
    with pytest.raises(ValidationError):
        traj.response = "changed"  # type: ignore[misc]


def test_grading_a_group_returns_a_new_group_without_infra_failures() -> None:
    trajs = tuple(Trajectory.single_turn(_task(), [1], [2 + i], [-0.1], str(i), group_index=i) for i in range(3))
    group = Group(task=_task(), trajectories=trajs)
    graded = group.graded([Score.correct(), Score.infra("worker died"), Score.wrong()])
    assert [t.group_index for t in graded.trajectories] == [0, 2]
    assert graded.rewards == [1.0, 0.0]
    assert group.scores == () and len(group.trajectories) == 3  # the input is untouched
    with pytest.raises(ValueError, match="scores for"):
        group.graded([Score.correct()])


def test_informative_means_rewards_differ_beyond_the_tolerance() -> None:
    trajs = tuple(Trajectory.single_turn(_task(), [1], [2], [-0.1], "") for _ in range(2))
    group = Group(task=_task(), trajectories=trajs)
    assert group.graded([Score.correct(), Score.wrong()]).is_informative()
    assert not group.graded([Score.correct(0.5), Score.correct(0.5 + 1e-9)]).is_informative()
    assert not Group(task=_task(), trajectories=trajs[:1]).graded([Score.correct()]).is_informative()
