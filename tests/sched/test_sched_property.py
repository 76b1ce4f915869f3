"""Whatever failures are injected — infrastructure errors, model errors, hangs past the deadline, results
delivered twice — every job is committed exactly once, with the status its script implies.

A discrete-event simulation over the pure `Scheduler`: each job has a script of what its attempts do;
times are simulated, so the property runs in milliseconds.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from posttrain.sched import InfraFailure, RetryPolicy, SchedConfig, Scheduler, WorkItem

Step = Literal["ok", "model", "infra", "hang"]
MAX_ATTEMPTS = 3
DEADLINE_S = 2.0


def expected(script: list[Step]) -> tuple[str, int]:
    """(status, attempts) the scheduler must commit for a job whose attempts do `script` (then ok)."""
    steps = script + ["ok"] * MAX_ATTEMPTS
    for number, step in enumerate(steps[:MAX_ATTEMPTS], start=1):
        if step == "ok":
            return "ok", number
        if step == "model":
            return "model_error", number
    return ("expired" if steps[MAX_ATTEMPTS - 1] == "hang" else "infra_failed"), MAX_ATTEMPTS


def simulate(scripts: list[list[Step]], duplicate: list[bool], num_workers: int, domains: int) -> Scheduler:
    sched = Scheduler(SchedConfig(max_queue=4, retry=RetryPolicy(max_attempts=MAX_ATTEMPTS, backoff_s=0.5,
                                                                  jitter=0.5, seed=3)))
    waiting = [WorkItem(f"j{k}", "episode", f"d{k % domains}", None, deadline_s=DEADLINE_S)
               for k in range(len(scripts))]
    events: list[tuple[float, int, str, int, Any, BaseException | None]] = []
    order = itertools.count()
    now = 0.0
    while len(sched.ledger) < len(scripts):
        while waiting and sched.admit(waiting[0]):
            waiting.pop(0)
        for attempt in sched.start(now, num_workers):
            k = int(attempt.job_id[1:])
            step = (scripts[k] + ["ok"] * MAX_ATTEMPTS)[attempt.attempt - 1]
            error = {"ok": None, "model": ValueError("wrong"), "infra": InfraFailure("died"),
                     "hang": None}[step]
            done_at = now + (3 * DEADLINE_S if step == "hang" else 1.0)
            for _ in range(2 if duplicate[k] else 1):
                heapq.heappush(events, (done_at, next(order), attempt.job_id, attempt.attempt,
                                        f"{attempt.job_id}:{attempt.attempt}", error))
        wake = sched.next_wake_s(now)
        later = min(t for t in (wake, events[0][0] if events else None) if t is not None)
        assert later > now  # time moves on: nothing due is left waiting for a wake-up
        now = later
        while events and events[0][0] <= now:
            _, _, job_id, number, value, error = heapq.heappop(events)
            sched.finish(job_id, number, now, value=None if error else value, error=error)
        sched.expire(now)
    return sched


@settings(max_examples=150, deadline=None)
@given(
    scripts=st.lists(st.lists(st.sampled_from(["ok", "model", "infra", "hang"]), max_size=4),
                     min_size=1, max_size=12),
    duplicate_seed=st.integers(0, 2**12 - 1),
    num_workers=st.integers(1, 4),
    domains=st.integers(1, 3),
)
def test_every_job_commits_exactly_once_whatever_fails(scripts: list[list[Step]], duplicate_seed: int,
                                                       num_workers: int, domains: int) -> None:
    duplicate = [bool(duplicate_seed >> k & 1) for k in range(len(scripts))]
    sched = simulate(scripts, duplicate, num_workers, domains)
    assert len(sched.ledger) == len(scripts) == sched.ledger.num_committed
    assert sched.num_in_flight == 0 and sched.num_queued == 0
    for k, script in enumerate(scripts):
        outcome = sched.outcome(f"j{k}")
        assert outcome is not None
        assert (outcome.status, outcome.attempts) == expected(script)
        if outcome.status == "ok":
            assert outcome.value == f"j{k}:{outcome.attempts}"  # the committed attempt's own value
    stats = sched.stats
    assert stats.ok + stats.model_errors + stats.infra_failed + stats.expired == len(scripts)
    assert stats.attempts == sum(expected(s)[1] for s in scripts)
