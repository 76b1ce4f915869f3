"""Verify executors: ordered results, worker crashes and hangs become infra failures, pool recovery."""

from __future__ import annotations

import pytest

from posttrain.types import ErrorKind
from posttrain.verify import (
    ExactConfig,
    ExecutorConfig,
    InlineExecutor,
    MathConfig,
    NumericConfig,
    PluginVerifierConfig,
    VerifyItem,
    WorkerPool,
)
from tests.verify.factories import make_task

PLUGIN = PluginVerifierConfig(plugin="tests.verify.plugins:fixed")


def _mixed_items(n: int) -> list[VerifyItem]:
    configs = [ExactConfig(), NumericConfig(), MathConfig()]
    return [(make_task(str(i), index=i), f"\\boxed{{{i + i % 2}}}", configs[i % 3]) for i in range(n)]


@pytest.fixture(scope="module")
def runner() -> WorkerPool:
    with WorkerPool(ExecutorConfig(num_workers=2, chunk_size=8)) as pool:
        yield pool  # type: ignore[misc]


def test_results_come_back_in_order(runner: WorkerPool) -> None:
    scores = runner.score_batch(_mixed_items(60))
    assert [s.passed for s in scores] == [i % 2 == 0 for i in range(60)]


def test_inline_executor_agrees_with_workers(runner: WorkerPool) -> None:
    items = _mixed_items(30)
    local = InlineExecutor().score_batch(items)
    assert local == runner.score_batch(items)


def test_empty_batch() -> None:
    assert WorkerPool().score_batch([]) == []


def test_crashing_worker_yields_infra_for_that_item_only() -> None:
    responses = ["ok", "ok", "crash", "ok", "ok"]
    items = [(make_task("x", index=i), r, PLUGIN) for i, r in enumerate(responses)]
    with WorkerPool(ExecutorConfig(num_workers=1)) as pool:
        scores = pool.score_batch(items)
        assert [s.error for s in scores] == [ErrorKind.NONE] * 2 + [ErrorKind.INFRA] + [ErrorKind.NONE] * 2
        assert pool.num_restarts == 1


def test_pool_is_usable_after_a_crash() -> None:
    with WorkerPool(ExecutorConfig(num_workers=1)) as pool:
        pool.score_batch([(make_task("x"), "crash", PLUGIN)])
        assert pool.score_batch([(make_task("x"), "ok", PLUGIN)])[0].passed


def test_hanging_item_times_out_as_infra() -> None:
    config = ExecutorConfig(num_workers=1, item_timeout_s=1.0)
    with WorkerPool(config) as pool:
        pool.score_batch([(make_task("x"), "ok", PLUGIN)])  # worker started and warm
        scores = pool.score_batch(
            [(make_task("x", index=i), r, PLUGIN) for i, r in enumerate(["hang", "ok"])]
        )
    assert [(s.error, s.passed) for s in scores] == [(ErrorKind.INFRA, False), (ErrorKind.NONE, True)]


def test_raising_verifier_is_infra() -> None:
    local = InlineExecutor()
    assert local.score_batch([(make_task("x"), "raise", PLUGIN)])[0].error is ErrorKind.INFRA


def test_unbuildable_verifier_is_infra_not_a_crash(runner: WorkerPool) -> None:
    broken = PluginVerifierConfig(plugin="no.such.module:factory")
    scores = runner.score_batch([(make_task("1"), "1", broken), (make_task("1"), "1", ExactConfig())])
    assert [s.error for s in scores] == [ErrorKind.INFRA, ErrorKind.NONE]


def test_close_is_idempotent_and_pool_restarts() -> None:
    pool = WorkerPool(ExecutorConfig(num_workers=1))
    pool.close()
    assert pool.score_batch([(make_task("1"), "1", ExactConfig())])[0].passed
    pool.close()
    pool.close()


def test_reasoning_gym_items_score_in_workers(runner: WorkerPool) -> None:
    from posttrain.tasks.families.reasoning_gym import ReasoningGymFamily, ReasoningGymFamilyConfig

    family = ReasoningGymFamily(ReasoningGymFamilyConfig(datasets=["basic_arithmetic", "graph_color"]))
    tasks = [(family.task(spec, 0, seed=0), family.verifier(spec)) for spec in family.domains()]
    items: list[VerifyItem] = [(task, task.answer or "", config) for task, config in tasks]
    items += [(task, "", config) for task, config in tasks]
    assert [s.reward for s in runner.score_batch(items)] == [1.0] * len(tasks) + [0.0] * len(tasks)


def test_a_pool_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="num_workers"):
        WorkerPool(ExecutorConfig(num_workers=0))
