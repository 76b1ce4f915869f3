"""run_jobs / drive over worker sets: order kept, fair share with a flood, backpressure, retries, model
errors, a hung job cut by its deadline and retried on another worker, and scaling applied.

The fair-share, backpressure and scaling runs use the inline worker set and a clock each item advances
(event order and times fixed by the test); the thread runs wait on events, under a second in all.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from posttrain.sched import (
    InfraFailure,
    RetryPolicy,
    ScalingConfig,
    SchedConfig,
    Scheduler,
    ThreadWorkerSet,
    WorkItem,
    drive,
    run_jobs,
)
from tests.fakes.workers import FakeClock, InlineWorkerSet

FAST_RETRY = RetryPolicy(max_attempts=3, backoff_s=0.0, jitter=0.0)


def item(job_id: str, domain: str = "d", payload: object = None, deadline_s: float | None = None) -> WorkItem:
    return WorkItem(job_id, "verify", domain, payload, deadline_s=deadline_s)


def test_outcomes_come_back_in_the_order_of_the_items() -> None:
    items = [item(f"j{k}", domain=f"d{k % 3}", payload=k) for k in range(30)]
    workers = ThreadWorkerSet(lambda work: work.payload * 10, num_workers=4)
    try:
        outcomes = run_jobs(items, workers, SchedConfig(max_queue=5))
    finally:
        workers.close()
    assert [o.job_id for o in outcomes] == [i.job_id for i in items]
    assert [o.value for o in outcomes] == [10 * k for k in range(30)]
    assert all(o.status == "ok" and o.attempts == 1 for o in outcomes)


def test_a_trickle_finishes_long_before_a_flood_listed_first() -> None:
    clock = FakeClock()
    finished_at: dict[str, float] = {}

    def slow(work: WorkItem) -> None:  # one serial worker, each item takes 1 s
        clock.advance(1.0)
        finished_at[work.job_id] = clock()

    flood = [item(f"a{k}", "a") for k in range(200)]
    trickle = [item(f"b{k}", "b") for k in range(10)]
    run_jobs(flood + trickle, InlineWorkerSet(slow), SchedConfig(max_queue=16), clock=clock)
    # b is admitted despite a's flood filling the bounded queue first, then alternates with a:
    # b9 is the 20th item run, done at 20 s; a's last is the 210th
    assert max(finished_at[f"b{k}"] for k in range(10)) == 20.0
    assert max(finished_at.values()) == 210.0


def test_the_bounded_queue_holds_the_excess_outside() -> None:
    sched = Scheduler(SchedConfig(max_queue=3))
    outcomes = drive(sched, [item(f"j{k}") for k in range(20)], InlineWorkerSet(lambda w: w.job_id))
    assert [o.value for o in outcomes] == [f"j{k}" for k in range(20)]
    assert sched.stats.max_queue_depth == 3 and sched.stats.admitted == 20
    assert sched.stats.refused > 0  # the driver met the bound and held items back


def test_infra_failures_are_retried_and_model_errors_are_not() -> None:
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def flaky(work: WorkItem) -> str:
        with lock:
            calls[work.job_id] += 1
            count = calls[work.job_id]
        if work.job_id == "flaky" and count < 3:
            raise InfraFailure(f"worker died ({count})")
        if work.job_id == "broken":
            raise InfraFailure("always")
        if work.job_id == "wrong":
            raise ValueError("bad answer")
        return f"{work.job_id}@{count}"

    workers = ThreadWorkerSet(flaky, num_workers=2)
    try:
        flaky_ok, broken, wrong = run_jobs([item("flaky"), item("broken"), item("wrong")], workers,
                                           SchedConfig(retry=FAST_RETRY))
    finally:
        workers.close()
    assert (flaky_ok.status, flaky_ok.value, flaky_ok.attempts) == ("ok", "flaky@3", 3)
    assert (broken.status, broken.attempts, broken.error) == ("infra_failed", 3, "InfraFailure: always")
    assert (wrong.status, wrong.attempts, wrong.error) == ("model_error", 1, "ValueError: bad answer")
    assert calls == {"flaky": 3, "broken": 3, "wrong": 1}


def test_a_hung_job_is_cut_at_its_deadline_and_retried_on_another_worker() -> None:
    sched = Scheduler(SchedConfig(retry=FAST_RETRY))
    release = threading.Event()
    ran_on: dict[tuple[str, int], str] = {}
    attempts: Counter[str] = Counter()
    lock = threading.Lock()

    def work(job: WorkItem) -> str:
        with lock:
            attempts[job.job_id] += 1
            number = attempts[job.job_id]
        ran_on[(job.job_id, number)] = threading.current_thread().name
        if job.job_id == "hang" and number == 1:
            release.wait(5)  # hung until the retry lets it go
            return "late"
        if job.job_id == "hang":
            release.set()
            return "retry"
        # "tail" keeps the run open until the driver has seen (and ignored) the late result
        deadline = time.monotonic() + 5
        while sched.stats.late_results == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        return "tail"

    workers = ThreadWorkerSet(work, num_workers=3)
    try:
        hang, tail = drive(sched, [item("hang", deadline_s=0.3), item("tail")], workers)
    finally:
        release.set()
        workers.close()
    assert (hang.status, hang.value, hang.attempts) == ("ok", "retry", 2)
    assert hang.worker == ran_on[("hang", 2)] != ran_on[("hang", 1)]
    assert tail.value == "tail"
    assert (sched.stats.expirations, sched.stats.late_results, sched.stats.retries) == (1, 1, 1)
    assert len(sched.ledger) == 2


def test_the_scaling_policy_resizes_the_worker_set() -> None:
    clock = FakeClock()

    def one_second(work: WorkItem) -> None:
        clock.advance(1.0)

    workers = InlineWorkerSet(one_second, num_workers=1)
    scaling = ScalingConfig(min_workers=1, max_workers=4, target_wait_s=1.0, cooldown_s=0.0,
                            scale_down_after_s=1000.0)
    outcomes = run_jobs([item(f"j{k}") for k in range(10)], workers, SchedConfig(), clock=clock,
                        scaling=scaling)
    assert all(o.status == "ok" for o in outcomes)
    # after j0 (1 s): 9 queued x 1 s / 1 s target = 9 workers, capped at 4; never shrunk (1000 s delay)
    assert workers.sizes == [4]


def test_job_ids_must_be_unique() -> None:
    with pytest.raises(ValueError):
        run_jobs([item("j"), item("j")], InlineWorkerSet(lambda w: None), SchedConfig())


def test_a_retry_falling_due_between_two_clock_reads_is_not_a_stall() -> None:
    ticks = iter(range(10_000))

    def clock() -> float:  # every read is 0.2 s after the one before
        return 0.2 * next(ticks)

    failed: set[str] = set()

    def fail_once(work: WorkItem) -> str:
        if work.job_id not in failed:
            failed.add(work.job_id)
            raise InfraFailure("worker died")
        return "done"

    retry = RetryPolicy(max_attempts=2, backoff_s=0.5, jitter=0.0)
    [outcome] = run_jobs([item("j")], InlineWorkerSet(fail_once), SchedConfig(retry=retry), clock=clock)
    assert (outcome.status, outcome.value, outcome.attempts) == ("ok", "done", 2)
