"""ThreadWorkerSet: values and errors through futures, named workers, growing, shrinking, closing.

Waits are on events with generous timeouts, never on wall-clock assertions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from posttrain.sched import InfraFailure, ThreadWorkerSet, WorkItem


def item(job_id: str, payload: object = None) -> WorkItem:
    return WorkItem(job_id, "sandbox", "d", payload)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def raise_or_return(work: WorkItem) -> object:
    if isinstance(work.payload, BaseException):
        raise work.payload
    return work.payload


def test_values_and_errors_come_back_through_the_futures() -> None:
    workers = ThreadWorkerSet(raise_or_return, num_workers=2)
    try:
        ok = workers.submit(item("ok", 7))
        infra = workers.submit(item("infra", InfraFailure("crashed")))
        model = workers.submit(item("model", ValueError("wrong")))
        assert ok.result(timeout=5) == 7
        assert isinstance(infra.exception(timeout=5), InfraFailure)
        assert isinstance(model.exception(timeout=5), ValueError)
        assert getattr(ok, "worker", "").startswith("worker-")
    finally:
        workers.close()


def test_growing_runs_more_items_at_once() -> None:
    barrier = threading.Barrier(3, timeout=5)
    workers = ThreadWorkerSet(lambda work: barrier.wait(), num_workers=1)
    try:
        workers.resize(3)
        assert workers.num_workers == 3
        futures = [workers.submit(item(f"j{k}")) for k in range(3)]
        # the barrier opens only if three items run at once
        assert sorted(f.result(timeout=5) for f in futures) == [0, 1, 2]
        assert len({getattr(f, "worker", "") for f in futures}) == 3
    finally:
        workers.close()


def test_shrinking_lets_surplus_threads_finish_then_exit() -> None:
    release = threading.Event()
    workers = ThreadWorkerSet(lambda work: release.wait(5), num_workers=3)
    try:
        busy = workers.submit(item("busy"))
        assert wait_until(lambda: busy.running())
        workers.resize(1)
        assert workers.num_workers == 1
        assert wait_until(lambda: workers.num_threads == 1)  # the two idle ones left at once
        release.set()
        assert busy.result(timeout=5) is True  # the busy one was not interrupted
        assert workers.submit(item("after")).result(timeout=5) is True
        assert workers.num_threads == 1
        with pytest.raises(ValueError):
            workers.resize(0)
    finally:
        workers.close()


def test_a_hung_item_keeps_its_thread_the_others_serve_on() -> None:
    release = threading.Event()
    workers = ThreadWorkerSet(lambda work: release.wait(5) if work.job_id == "hang" else work.job_id, 2)
    try:
        hung = workers.submit(item("hang"))
        assert [workers.submit(item(f"j{k}")).result(timeout=5) for k in range(3)] == ["j0", "j1", "j2"]
        assert not hung.done()
    finally:
        release.set()
        workers.close()


def test_close_cancels_what_has_not_started() -> None:
    release = threading.Event()
    workers = ThreadWorkerSet(lambda work: release.wait(5), num_workers=1)
    running = workers.submit(item("running"))
    assert wait_until(lambda: running.running())
    waiting = workers.submit(item("waiting"))
    workers.close()
    assert waiting.cancelled()
    release.set()
    assert running.result(timeout=5) is True
    assert wait_until(lambda: workers.num_threads == 0)
    with pytest.raises(RuntimeError):
        workers.submit(item("late"))
