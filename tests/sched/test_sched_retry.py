"""RetryPolicy: which errors are retried, and the backoff schedule worked out by hand."""

from __future__ import annotations

import pytest

from posttrain.sched import DeadlineExceeded, InfraFailure, RetryPolicy


def test_only_infrastructure_failures_are_retriable() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.is_retriable(InfraFailure("worker died"))
    assert policy.is_retriable(DeadlineExceeded("hung"))
    assert not policy.is_retriable(ValueError("wrong answer"))
    assert not policy.is_retriable(TimeoutError("the model's program timed out"))
    assert policy.should_retry(2, InfraFailure())
    assert not policy.should_retry(3, InfraFailure())  # the third attempt was the last
    assert not policy.should_retry(1, RuntimeError())


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(backoff_s=0.5, backoff_max_s=3.0, jitter=0.0)
    # 0.5 * 2**(attempt - 1): 0.5, 1, 2, then 4 capped at 3
    assert [policy.delay_s(a) for a in (1, 2, 3, 4, 50)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ValueError):
        policy.delay_s(0)


def test_jitter_shortens_within_its_fraction_and_is_seeded() -> None:
    policy = RetryPolicy(backoff_s=1.0, backoff_max_s=10.0, jitter=0.5, seed=7)
    delays = [policy.delay_s(1, f"job{k}") for k in range(50)]
    assert all(0.5 < d <= 1.0 for d in delays)
    assert len(set(delays)) > 40  # spread, not one value
    assert delays == [policy.delay_s(1, f"job{k}") for k in range(50)]
    other = RetryPolicy(backoff_s=1.0, backoff_max_s=10.0, jitter=0.5, seed=8)
    assert delays != [other.delay_s(1, f"job{k}") for k in range(50)]
