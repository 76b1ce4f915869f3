"""The reward stage: graded groups are new records, infra failures retried then dropped, and the
random-reward control's coin does not look at the response."""

from __future__ import annotations

from collections.abc import Sequence

from posttrain.train.config import RewardConfig
from posttrain.train.stages import RewardStage
from posttrain.types import Group, Score, Task, Trajectory


class FakeGrader:
    """Passes a response equal to the gold; fails with an infra error the first `flaky` times it sees "?"."""

    def __init__(self, flaky: int = 0) -> None:
        self.flaky = flaky
        self.calls = 0

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        self.calls += 1
        out = []
        for task, response in pairs:
            if response == "?" and self.flaky:
                self.flaky -= 1
                out.append(Score.infra("worker died"))
            else:
                out.append(Score.correct() if response == task.gold else Score.wrong())
        return out


def _group(responses: list[str]) -> Group:
    task = Task(id="a/b/c#0", domain_id="a/b/c", prompt="q", gold="4")
    trajs = tuple(Trajectory.single_turn(task, [1], [2], [-0.1], r, group_index=i) for i, r in enumerate(responses))
    return Group(task=task, trajectories=trajs)


def test_random_control_ignores_the_response() -> None:
    right, wrong = _group(["4"] * 64), _group(["no"] * 64)
    config = RewardConfig(mode="random")
    grader = FakeGrader()
    scores_right = RewardStage(grader, config, seed=5).score([right])[0].rewards  # type: ignore[arg-type]
    scores_wrong = RewardStage(grader, config, seed=5).score([wrong])[0].rewards  # type: ignore[arg-type]
    assert scores_right == scores_wrong and grader.calls == 0
    assert 0.3 < sum(scores_right) / 64 < 0.7  # a fair coin, not a constant


def test_infra_failures_are_retried_then_dropped_and_inputs_untouched() -> None:
    group = _group(["4", "?", "no"])
    stage = RewardStage(FakeGrader(flaky=1), RewardConfig(infra_retries=1), seed=0)  # type: ignore[arg-type]
    graded = stage.score([group])[0]
    assert graded.rewards == [1.0, 0.0, 0.0] and stage.num_infra_failures == 0  # the retry succeeded
    assert group.scores == ()
    hopeless = RewardStage(FakeGrader(flaky=5), RewardConfig(infra_retries=2), seed=0)  # type: ignore[arg-type]
    kept = hopeless.score([group])[0]
    assert [t.response for t in kept.trajectories] == ["4", "no"] and hopeless.num_infra_failures == 1


def test_inverted_domains_get_one_minus_the_reward_and_a_flipped_pass() -> None:
    group = _group(["4", "no", "?"])
    config = RewardConfig(invert_domains=["a/b/*"], infra_retries=0)
    graded = RewardStage(FakeGrader(flaky=1), config, seed=0).score([group])[0]  # type: ignore[arg-type]
    assert graded.rewards == [0.0, 1.0]  # the infra failure stays one and is dropped, never inverted
    assert [s.passed for s in graded.scores] == [False, True] and graded.scores[0].details["inverted"]
    other = RewardStage(FakeGrader(), RewardConfig(invert_domains=["x/*"]), seed=0)  # type: ignore[arg-type]
    assert other.score([group])[0].rewards == [1.0, 0.0, 0.0]  # a domain no pattern matches is untouched
    episodes = group.model_copy(update={"scores": (Score.correct(), Score.wrong(reward=0.25), Score.wrong())})
    passed = RewardStage(FakeGrader(), config, seed=0).score([episodes])[0]  # type: ignore[arg-type]
    assert passed.rewards == [0.0, 0.75, 1.0]  # environment-graded groups are inverted too
