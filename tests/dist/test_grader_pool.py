"""`RayGraderPool`: scores in order across domains and workers; a reward worker that dies mid-grade is
replaced; a grading that hangs is cut by its deadline; a sandbox killed mid-grade never reaches the
learner (the reward stage re-grades the infra failure)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import pytest

from posttrain.dist.grader_pool import RayGraderPool
from posttrain.sandbox.host import host_features
from posttrain.train.config import RewardConfig
from posttrain.train.stages import RewardStage
from posttrain.types import ErrorKind, Group, Score, Task, Trajectory
from tests.fakes.dist_workers import fake_grader, sandbox_killing_grader

pytestmark = pytest.mark.ray


def task(domain: str, index: int) -> Task:
    return Task(id=f"{domain}#{index}", domain_id=domain, prompt="say it", gold=str(index), answer=str(index))


def pairs(count: int) -> list[tuple[Task, str]]:
    """Items over three domains; every third response is wrong."""
    items = [task("d/" + "abc"[i % 3], i) for i in range(count)]
    return [(t, "wrong" if i % 3 == 2 else str(i)) for i, t in enumerate(items)]


def test_scores_come_back_in_order_from_both_workers(ray_cluster: None) -> None:
    with RayGraderPool(fake_grader, num_workers=2, chunk_size=2) as pool:
        items = pairs(12)
        scores = pool.grade(items)
        assert [s.passed for s in scores] == [i % 3 != 2 for i in range(12)]
        assert len({s.details["pid"] for s in scores}) == 2  # the chunks were spread over the workers
        turns = pool.grade_turns([(t, ["x", r]) for t, r in items[:2]])
        assert [s.passed for s in turns] == [False, False]  # "x\n0" is not "0"
        assert pool.grade([]) == []


def test_a_reward_worker_that_dies_mid_grade_is_replaced_and_its_chunk_regraded(
    ray_cluster: None, tmp_path: Path
) -> None:
    flag = tmp_path / "crash"
    with RayGraderPool(functools.partial(fake_grader, str(flag)), num_workers=2, chunk_size=3) as pool:
        flag.touch()
        items = pairs(12)
        scores = pool.grade(items)
        assert not flag.exists()
        assert [s.passed for s in scores] == [i % 3 != 2 for i in range(12)]
        assert not any(s.is_infra_failure for s in scores)
        assert pool.workers.num_replaced == 1 and pool.workers.num_live == 2


def test_a_grading_that_hangs_is_cut_by_its_deadline_as_an_infra_failure(ray_cluster: None) -> None:
    with RayGraderPool(fake_grader, num_workers=2, chunk_size=8, timeout_s=3.0, max_attempts=2) as pool:
        items = [(task("d/ok", 0), "0"), (task("d/stuck", 1), "hang"), (task("d/ok", 2), "2")]
        pool.workers.wait_ready()  # a deadline counts a new worker's start-up too
        scores = pool.grade(items)
        assert [s.error for s in scores] == [ErrorKind.NONE, ErrorKind.INFRA, ErrorKind.NONE]
        assert "expired after 2 attempts" in scores[1].message
        assert pool.workers.num_replaced == 2 and pool.workers.num_live == 2  # each hung worker killed
        pool.workers.wait_ready()
        assert [s.passed for s in pool.grade([items[0], (task("d/other", 3), "3")])] == [True, True]


class Recording:
    """Keeps every raw score the pool returned, so the test sees what the reward stage hid."""

    def __init__(self, pool: RayGraderPool) -> None:
        self.pool = pool
        self.raw: list[Score] = []

    def grade(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        scores = self.pool.grade(items)
        self.raw.extend(scores)
        return scores

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        return self.pool.grade_turns(items)

    def close(self) -> None:
        self.pool.close()


@pytest.mark.skipif(not host_features().bwrap_usable, reason="bubblewrap is not usable here")
def test_a_sandbox_killed_mid_grade_never_reaches_the_learner(ray_cluster: None, tmp_path: Path) -> None:
    tests = "def check(f):\n    assert f(1) == 2\n"
    gold = {"language": "python", "style": "function", "prompt": "", "tests": tests, "entry_point": "f", "setup": ""}
    code = Task(id="code/test#0", domain_id="code/test", prompt="write f", gold=gold)
    slow_right = "import subprocess\ndef f(x):\n    subprocess.run(['sleep', '2'])\n    return x + 1\n"
    responses = [slow_right, "def f(x):\n    return x\n", slow_right]
    group = Group(task=code, trajectories=tuple(
        Trajectory.single_turn(code, [1], [2], [0.0], r, group_index=j) for j, r in enumerate(responses)))
    flag = tmp_path / "kill"
    flag.touch()
    grader = Recording(RayGraderPool(functools.partial(sandbox_killing_grader, str(flag)), num_workers=1))
    try:
        graded = RewardStage(grader, RewardConfig(infra_retries=2), seed=0).score([group])
    finally:
        grader.close()
    assert not flag.exists() and any(s.is_infra_failure for s in grader.raw)  # the kill did land mid-grade
    (result,) = graded
    assert len(result.trajectories) == 3  # nothing dropped
    assert [s.passed for s in result.scores] == [True, False, True]
    assert all(s.error in (ErrorKind.NONE, ErrorKind.MODEL) for s in result.scores)
