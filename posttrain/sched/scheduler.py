"""The scheduler: a pure state machine over jobs and attempts, and `run_jobs`, the driver over a worker set.

`Scheduler` holds the queue, the attempts in flight and the ledger, and is told what happened with
explicit times: `admit` (backpressure: False when full), `start` (which attempts to submit now),
`finish` (an attempt's value or error), `expire` (attempts past their deadline), `plan_resize`. It
never reads a clock, sleeps or starts a thread, so every policy is testable with made-up times.

Semantics: an attempt's error that is an `InfraFailure` is retried after the retry policy's backoff
(ahead of fresh items of its priority) until `max_attempts`, then committed as `infra_failed`; an
attempt that overruns its item's `deadline_s` (counted from its submission) is abandoned, revoked in
the ledger so its late result can never count, and retried the same way (`expired` when it was the
last); any other error is committed at once as `model_error`. Each job is committed exactly once.

`run_jobs` is the thin effectful edge: it admits items (the excess waits outside the bounded queue,
drawn domain by domain), keeps at most `num_workers * max_in_flight_per_worker` attempts in flight,
waits for futures with the clock's deadlines, cancels abandoned attempts, and applies the scaling
policy to `WorkerSet.resize`.
Not here: queue order (`queues.py`), backoff (`retry.py`), pool sizing (`scaling.py`).
"""

from __future__ import annotations

import queue
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.sched.items import (
    DeadlineExceeded,
    InfraFailure,
    Outcome,
    OutcomeStatus,
    WorkItem,
    describe_error,
)
from posttrain.sched.ledger import ResultLedger
from posttrain.sched.queues import FairQueue
from posttrain.sched.retry import RetryPolicy
from posttrain.sched.scaling import PoolStats, ScalingConfig, ScalingPolicy
from posttrain.sched.stats import SchedStats
from posttrain.sched.workers import WorkerSet


class SchedConfig(StrictModel):
    """Queue bound, concurrency, retries and per-domain shares of one scheduler."""

    max_queue: int = Field(1024, ge=1)
    """Most fresh items queued at once; further admissions are refused (backpressure)."""
    max_in_flight_per_worker: int = Field(1, ge=1)
    """Attempts submitted per worker at once (above 1, some wait inside the worker set, their deadline
    already counting)."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Which failures are retried, how often and after what wait."""
    domain_weights: dict[str, float] = Field(default_factory=dict)
    """Fair-share weight per domain (absent: 1.0); a domain of weight 2 gets twice the share."""
    domain_quota: dict[str, int] = Field(default_factory=dict)
    """Most attempts of one domain in flight at once (absent: no limit)."""
    service_ewma_alpha: float = Field(0.2, gt=0, le=1)
    """Weight of the newest service time in its exponentially weighted mean."""


@dataclass(frozen=True)
class Attempt:
    """One submission of a job."""

    item: WorkItem
    """The job."""
    attempt: int
    """1 for the first submission, 2 for the first retry, ..."""
    started_s: float
    """When it was handed to the workers."""

    @property
    def job_id(self) -> str:
        return self.item.job_id

    @property
    def deadline_at_s(self) -> float | None:
        return None if self.item.deadline_s is None else self.started_s + self.item.deadline_s


class Scheduler:
    """Jobs, attempts and outcomes of one run (see module docstring)."""

    def __init__(self, config: SchedConfig, scaling: ScalingConfig | None = None) -> None:
        self.config = config
        self.queue = FairQueue(config.max_queue, config.domain_weights, config.domain_quota)
        self.ledger = ResultLedger()
        self.stats = SchedStats()
        self.scaling = None if scaling is None else ScalingPolicy(scaling)
        self._known: set[str] = set()
        self._running: dict[str, Attempt] = {}
        self._num_attempts: dict[str, int] = {}
        self._in_flight_by_domain: Counter[str] = Counter()
        self._last_resize_s: float | None = None

    # admission -------------------------------------------------------------------------------------
    def can_admit(self) -> bool:
        """Whether a new item would be accepted now (poll before drawing new tasks)."""
        return self.queue.has_capacity()

    def admit(self, item: WorkItem) -> bool:
        """Queue a new job; False when the queue is full (hold it and try later)."""
        if item.job_id in self._known:
            raise ValueError(f"job {item.job_id!r} admitted twice")
        if not self.queue.offer(item):
            self.stats.refused += 1
            return False
        self._known.add(item.job_id)
        self.stats.admitted += 1
        self.stats.max_queue_depth = max(self.stats.max_queue_depth, len(self.queue))
        return True

    # state -----------------------------------------------------------------------------------------
    @property
    def num_in_flight(self) -> int:
        return len(self._running)

    @property
    def num_queued(self) -> int:
        return len(self.queue)

    @property
    def num_open(self) -> int:
        """Admitted jobs not yet committed."""
        return len(self._known) - len(self.ledger)

    def running(self) -> list[Attempt]:
        return list(self._running.values())

    def outcome(self, job_id: str) -> Outcome | None:
        return self.ledger.get(job_id)

    def next_wake_s(self, now_s: float) -> float | None:
        """The next time something falls due without any result arriving: a deadline (perhaps already
        past: expire now) or a retry's backoff ending after `now_s` (a retry due by now waits for a free
        slot, which only a result or a deadline makes)."""
        times = [t for t in (a.deadline_at_s for a in self._running.values()) if t is not None]
        self.queue.release(now_s)
        ready = self.queue.next_ready_s()
        if ready is not None:
            times.append(ready)
        return min(times) if times else None

    # transitions -----------------------------------------------------------------------------------
    def start(self, now_s: float, capacity: int) -> list[Attempt]:
        """Attempts to submit now, so that at most `capacity` are in flight; the caller submits them."""
        started = []
        while len(self._running) < capacity:
            item = self.queue.pop(now_s, self._in_flight_by_domain)
            if item is None:
                break
            number = self._num_attempts.get(item.job_id, 0) + 1
            self._num_attempts[item.job_id] = number
            attempt = Attempt(item, number, now_s)
            self._running[item.job_id] = attempt
            self._in_flight_by_domain[item.domain_id] += 1
            self.stats.attempts += 1
            started.append(attempt)
        return started

    def finish(self, job_id: str, attempt: int, now_s: float, value: Any = None,
               error: BaseException | None = None, worker: str = "") -> Outcome | None:
        """Settle attempt `attempt` of `job_id`: the outcome when it commits the job, else None (a retry
        was queued, or the result is late — its attempt was abandoned or already settled — and ignored)."""
        live = self._running.get(job_id)
        if live is None or live.attempt != attempt:
            self.stats.late_results += 1
            return None
        self._settle(live)
        self.stats.record_service(live.item.kind, max(0.0, now_s - live.started_s),
                                  self.config.service_ewma_alpha)
        if error is None:
            return self._commit(live, Outcome(job_id, value, attempt, "ok", worker=worker))
        if not self.config.retry.is_retriable(error):
            return self._commit(live, Outcome(job_id, None, attempt, "model_error",
                                              describe_error(error), worker))
        return self._infra_failure(live, error, now_s, worker)

    def expire(self, now_s: float) -> list[Attempt]:
        """Abandon attempts past their deadline (the caller cancels their futures); each is retried or,
        when it was the last, committed as `expired`."""
        late = [a for a in self._running.values() if a.deadline_at_s is not None and a.deadline_at_s <= now_s]
        for attempt in late:
            self._settle(attempt)
            self.stats.expirations += 1
            error = DeadlineExceeded(f"attempt {attempt.attempt} ran past its deadline of "
                                     f"{attempt.item.deadline_s:g} s")
            self._infra_failure(attempt, error, now_s, "")  # commits `expired` if it was the last
            self.ledger.revoke(attempt.job_id, attempt.attempt)
        return late

    def plan_resize(self, now_s: float, num_workers: int) -> int | None:
        """The size to resize the pool to now, or None to keep it (and no scaling policy: always None)."""
        if self.scaling is None:
            return None
        pool = PoolStats(len(self.queue), len(self._running), num_workers, self.stats.service_time_s,
                         self._last_resize_s)
        wanted = self.scaling.decide(pool, now_s)
        if wanted == num_workers:
            return None
        self._last_resize_s = now_s
        self.stats.resizes += 1
        return wanted

    # internals -------------------------------------------------------------------------------------
    def _settle(self, attempt: Attempt) -> None:
        del self._running[attempt.job_id]
        self._in_flight_by_domain[attempt.item.domain_id] -= 1

    def _infra_failure(self, attempt: Attempt, error: BaseException, now_s: float,
                       worker: str) -> Outcome | None:
        self.stats.infra_failures += 1
        retry = self.config.retry
        if retry.should_retry(attempt.attempt, error):
            self.stats.retries += 1
            self.queue.requeue(attempt.item, now_s + retry.delay_s(attempt.attempt, attempt.job_id))
            self.stats.max_queue_depth = max(self.stats.max_queue_depth, len(self.queue))
            return None
        status: OutcomeStatus = "expired" if isinstance(error, DeadlineExceeded) else "infra_failed"
        return self._commit(attempt, Outcome(attempt.job_id, None, attempt.attempt, status,
                                             describe_error(error), worker))

    def _commit(self, attempt: Attempt, outcome: Outcome) -> Outcome | None:
        if not self.ledger.commit(attempt.job_id, attempt.attempt, outcome):
            return None
        counter = {"ok": "ok", "model_error": "model_errors", "infra_failed": "infra_failed",
                   "expired": "expired"}[outcome.status]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        return outcome


# the effectful edge --------------------------------------------------------------------------------

def run_jobs(items: Sequence[WorkItem], workers: WorkerSet, config: SchedConfig,
             clock: Callable[[], float] = time.monotonic,
             scaling: ScalingConfig | None = None) -> list[Outcome]:
    """Run every item on `workers` to its outcome; outcomes in the order of `items` (module docstring)."""
    return drive(Scheduler(config, scaling), items, workers, clock)


def drive(scheduler: Scheduler, items: Sequence[WorkItem], workers: WorkerSet,
          clock: Callable[[], float] = time.monotonic) -> list[Outcome]:
    """`run_jobs` with a scheduler of the caller's, whose `stats` it can read afterwards.

    Waits are real seconds as long as the differences of `clock` (a clock of other units works only if
    it advances on its own). Abandoned attempts are cancelled; one still running when this returns is
    left to finish, its result ignored.
    """
    ids = [item.job_id for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("run_jobs: job ids must be unique")
    waiting = _Waiting(items)
    done: queue.SimpleQueue[tuple[str, int, Future[Any]]] = queue.SimpleQueue()
    futures: dict[tuple[str, int], Future[Any]] = {}
    target = len(scheduler.ledger) + len(items)
    try:
        while len(scheduler.ledger) < target:
            now = clock()
            waiting.admit_into(scheduler)
            _maybe_resize(scheduler, workers, now)
            capacity = workers.num_workers * scheduler.config.max_in_flight_per_worker
            for attempt in scheduler.start(now, capacity):
                _submit(scheduler, workers, attempt, futures, done, clock)
            _wait_and_settle(scheduler, done, futures, clock, now)
            for attempt in scheduler.expire(clock()):
                futures.pop((attempt.job_id, attempt.attempt)).cancel()
    finally:
        for future in futures.values():
            future.cancel()
    return [_committed(scheduler, job_id) for job_id in ids]


class _Waiting:
    """Items not yet admitted, per domain; admitted from the domain with the fewest queued first, so a
    flood listed first cannot keep another domain out of the bounded queue."""

    def __init__(self, items: Sequence[WorkItem]) -> None:
        self._by_domain: dict[str, deque[WorkItem]] = {}
        for item in items:
            self._by_domain.setdefault(item.domain_id, deque()).append(item)

    def admit_into(self, scheduler: Scheduler) -> None:
        depth = scheduler.queue.depth_by_domain()
        while self._by_domain:  # until the queue refuses one (counted in `stats.refused`)
            domain = min(self._by_domain, key=lambda d: depth.get(d, 0))
            pending = self._by_domain[domain]
            if not scheduler.admit(pending[0]):
                return
            pending.popleft()
            depth[domain] = depth.get(domain, 0) + 1
            if not pending:
                del self._by_domain[domain]


def _maybe_resize(scheduler: Scheduler, workers: WorkerSet, now_s: float) -> None:
    size = scheduler.plan_resize(now_s, workers.num_workers)
    if size is not None:
        workers.resize(size)


def _submit(scheduler: Scheduler, workers: WorkerSet, attempt: Attempt,
            futures: dict[tuple[str, int], Future[Any]],
            done: queue.SimpleQueue[tuple[str, int, Future[Any]]], clock: Callable[[], float]) -> None:
    key = (attempt.job_id, attempt.attempt)
    try:
        future = workers.submit(attempt.item)
    except InfraFailure as exc:  # the set could not even take it: a failed attempt like any other
        scheduler.finish(key[0], key[1], clock(), error=exc)
        return
    futures[key] = future
    future.add_done_callback(lambda f: done.put((key[0], key[1], f)))


def _wait_and_settle(scheduler: Scheduler, done: queue.SimpleQueue[tuple[str, int, Future[Any]]],
                     futures: dict[tuple[str, int], Future[Any]], clock: Callable[[], float],
                     started_at_s: float) -> None:
    """Block until a result arrives or something falls due, then settle every result that has arrived.

    `started_at_s` is the time `start` last ran at: a retry due after it is a reason to wake, even if
    it is already due by the clock now."""
    wake = scheduler.next_wake_s(started_at_s)
    if scheduler.scaling is not None:
        tick = started_at_s + scheduler.scaling.config.interval_s
        wake = tick if wake is None else min(wake, tick)
    if wake is None and not futures:
        raise RuntimeError("scheduler stalled: jobs open but nothing queued, running or due")
    try:
        first = done.get(timeout=None if wake is None else max(0.0, wake - clock()))
    except queue.Empty:
        return
    arrived = [first]
    while True:
        try:
            arrived.append(done.get_nowait())
        except queue.Empty:
            break
    for job_id, attempt, future in arrived:
        futures.pop((job_id, attempt), None)
        if future.cancelled():
            continue
        error = future.exception()
        scheduler.finish(job_id, attempt, clock(), value=None if error is not None else future.result(),
                         error=error, worker=getattr(future, "worker", ""))


def _committed(scheduler: Scheduler, job_id: str) -> Outcome:
    outcome = scheduler.outcome(job_id)
    assert outcome is not None, job_id
    return outcome
