"""Scheduler, the pure state machine, driven with made-up times: retries with backoff up to the limit,
model errors final, deadlines, exactly-once under late and duplicate results, quotas, backpressure."""

from __future__ import annotations

import pytest

from posttrain.sched import InfraFailure, RetryPolicy, ScalingConfig, SchedConfig, Scheduler, WorkItem

NO_JITTER = RetryPolicy(max_attempts=3, backoff_s=0.5, backoff_max_s=10.0, jitter=0.0)


def item(job_id: str, domain: str = "a", deadline_s: float | None = None) -> WorkItem:
    return WorkItem(job_id, "verify", domain, None, deadline_s=deadline_s)


def scheduler(**overrides: object) -> Scheduler:
    return Scheduler(SchedConfig.model_validate({"retry": NO_JITTER, **overrides}))


def test_infra_failures_retry_with_backoff_up_to_the_limit() -> None:
    sched = scheduler()
    assert sched.admit(item("j"))
    [first] = sched.start(0.0, capacity=1)
    assert sched.finish("j", first.attempt, 0.1, error=InfraFailure("worker died")) is None
    assert sched.next_wake_s(0.1) == pytest.approx(0.6)  # failed at 0.1 + 0.5 backoff
    assert sched.start(0.59, capacity=1) == []
    [second] = sched.start(0.6, capacity=1)
    assert second.attempt == 2
    assert sched.finish("j", 2, 0.7, error=InfraFailure("sandbox crashed")) is None
    assert sched.start(1.69, capacity=1) == []  # 0.7 + 1.0 (doubled)
    [third] = sched.start(1.7, capacity=1)
    outcome = sched.finish("j", third.attempt, 1.8, error=InfraFailure("again"))
    assert outcome is not None
    assert (outcome.status, outcome.attempts, outcome.error) == ("infra_failed", 3, "InfraFailure: again")
    assert (sched.stats.retries, sched.stats.infra_failures, sched.stats.infra_failed) == (2, 3, 1)
    assert sched.num_open == 0 and sched.next_wake_s(1.8) is None


def test_a_due_retry_waiting_for_a_slot_is_no_reason_to_wake() -> None:
    sched = scheduler()
    sched.admit(item("j"))
    sched.admit(item("k"))
    sched.start(0.0, capacity=1)
    sched.finish("j", 1, 0.0, error=InfraFailure())  # j's retry is due at 0.5
    sched.start(0.0, capacity=1)  # k takes the only slot
    assert sched.next_wake_s(0.4) == 0.5
    # at 1.0 the retry is due but the slot is k's: only k's result can change anything
    assert sched.next_wake_s(1.0) is None
    sched.finish("k", 1, 1.0, value=None)
    assert [a.job_id for a in sched.start(1.0, capacity=1)] == ["j"]


def test_a_retry_that_succeeds_commits_its_value() -> None:
    sched = scheduler()
    sched.admit(item("j"))
    sched.start(0.0, 1)
    sched.finish("j", 1, 1.0, error=InfraFailure())
    [again] = sched.start(1.5, 1)
    outcome = sched.finish("j", again.attempt, 2.0, value=42, worker="w1")
    assert outcome is not None and (outcome.status, outcome.value, outcome.attempts, outcome.worker) == (
        "ok", 42, 2, "w1")


def test_model_errors_are_never_retried() -> None:
    sched = scheduler()
    sched.admit(item("j"))
    sched.start(0.0, 1)
    outcome = sched.finish("j", 1, 0.2, error=ValueError("not a number"))
    assert outcome is not None
    assert (outcome.status, outcome.attempts, outcome.value) == ("model_error", 1, None)
    assert outcome.error == "ValueError: not a number"
    assert sched.stats.retries == 0 and sched.num_queued == 0 and sched.next_wake_s(0.2) is None


def test_a_hung_attempt_is_abandoned_at_its_deadline_and_its_late_result_ignored() -> None:
    sched = scheduler(retry=RetryPolicy(max_attempts=3, backoff_s=0.0, jitter=0.0))
    sched.admit(item("j", deadline_s=2.0))
    [first] = sched.start(0.0, 2)
    assert first.deadline_at_s == 2.0 and sched.next_wake_s(0.0) == 2.0
    assert sched.expire(1.99) == []
    assert sched.expire(2.0) == [first]
    assert sched.ledger.is_revoked("j", 1)
    [second] = sched.start(2.0, 2)
    assert second.attempt == 2
    assert sched.finish("j", 1, 2.5, value="late") is None  # the hung attempt returns while 2 runs
    outcome = sched.finish("j", 2, 3.0, value="retry")
    assert outcome is not None and (outcome.value, outcome.attempts) == ("retry", 2)
    assert sched.finish("j", 2, 3.1, value="duplicate") is None  # delivered twice
    assert sched.finish("j", 1, 9.0, value="later still") is None
    assert sched.outcome("j") == outcome and len(sched.ledger) == 1
    assert (sched.stats.expirations, sched.stats.late_results, sched.stats.ok) == (1, 3, 1)


def test_a_job_whose_last_attempt_overran_is_expired() -> None:
    sched = scheduler(retry=RetryPolicy(max_attempts=2, backoff_s=0.0, jitter=0.0))
    sched.admit(item("j", deadline_s=1.0))
    sched.start(0.0, 1)
    sched.expire(1.0)
    sched.start(1.0, 1)
    [last] = sched.expire(2.0)
    outcome = sched.outcome("j")
    assert last.attempt == 2 and outcome is not None
    assert (outcome.status, outcome.attempts) == ("expired", 2)
    assert "deadline" in outcome.error and sched.stats.expired == 1


def test_quotas_cap_a_domain_in_flight() -> None:
    sched = scheduler(domain_quota={"a": 1})
    for k in range(3):
        sched.admit(item(f"a{k}", "a"))
    sched.admit(item("b0", "b"))
    started = sched.start(0.0, capacity=4)
    assert sorted(a.job_id for a in started) == ["a0", "b0"]
    sched.finish("a0", 1, 1.0, value=None)
    assert [a.job_id for a in sched.start(1.0, capacity=4)] == ["a1"]


def test_capacity_bounds_attempts_in_flight() -> None:
    sched = scheduler()
    for k in range(5):
        sched.admit(item(f"j{k}"))
    assert len(sched.start(0.0, capacity=2)) == 2
    assert sched.start(0.0, capacity=2) == []
    assert sched.num_in_flight == 2 and sched.num_queued == 3


def test_a_full_queue_refuses_admission_until_work_starts() -> None:
    sched = scheduler(max_queue=2)
    assert sched.admit(item("x")) and sched.admit(item("y"))
    assert not sched.can_admit()
    assert not sched.admit(item("z"))
    assert sched.stats.refused == 1 and sched.stats.admitted == 2
    sched.start(0.0, 1)
    assert sched.can_admit() and sched.admit(item("z"))
    assert sched.stats.max_queue_depth == 2


def test_a_job_id_is_admitted_once() -> None:
    sched = scheduler()
    sched.admit(item("j"))
    with pytest.raises(ValueError):
        sched.admit(item("j"))


def test_service_times_feed_the_stats_and_the_scaling_plan() -> None:
    scaling = ScalingConfig(min_workers=1, max_workers=4, target_wait_s=1.0, cooldown_s=0.0)
    sched = Scheduler(SchedConfig(service_ewma_alpha=0.5), scaling)
    for k in range(6):
        sched.admit(item(f"j{k}"))
    assert sched.plan_resize(0.0, 1) is None  # no service time measured yet
    sched.start(0.0, 1)
    sched.finish("j0", 1, 2.0, value=None)  # 2 s
    sched.start(2.0, 1)
    sched.finish("j1", 1, 3.0, value=None)  # 1 s: mean 0.5 x 1 + 0.5 x 2 = 1.5
    assert sched.stats.service_time_s == pytest.approx(1.5)
    assert sched.stats.service_time_s_by_kind == {"verify": pytest.approx(1.5)}
    # 4 queued x 1.5 s / 1 s = 6, capped at 4
    assert sched.plan_resize(3.0, 1) == 4 and sched.stats.resizes == 1
    assert Scheduler(SchedConfig()).plan_resize(0.0, 1) is None  # no policy, no resizing
    logged = sched.stats.as_dict()
    assert logged["sched/ok"] == 2.0 and logged["sched/service_time_s/verify"] == pytest.approx(1.5)
