"""When a failed attempt is tried again: only infrastructure failures, with capped exponential backoff.

Guarantees: `RetryPolicy.delay_s(attempt, key)` is a pure function of the policy, the attempt number
and the key (the job id): the jitter is drawn from a generator seeded by (seed, key, attempt), so a
run's retry schedule does not depend on the order in which failures arrive. Only `InfraFailure` (a
deadline overrun included, `DeadlineExceeded`) is retriable; every other exception is final.
Not here: the clock, the waiting, or re-queueing (the scheduler does those).
"""

from __future__ import annotations

import random

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.sched.items import InfraFailure


class RetryPolicy(StrictModel):
    """How many times a job is attempted and how long it waits between infrastructure failures."""

    max_attempts: int = Field(3, ge=1)
    """Attempts per job, the first included (1: never retry)."""
    backoff_s: float = Field(0.5, ge=0)
    """Wait before the second attempt; each later wait doubles."""
    backoff_max_s: float = Field(30.0, ge=0)
    """Cap on one wait."""
    jitter: float = Field(0.2, ge=0, le=1)
    """Each wait is shortened by a random fraction in [0, jitter), so failures of one burst spread out."""
    seed: int = 0
    """Seed of the jitter (with the job id and the attempt number)."""

    def is_retriable(self, error: BaseException) -> bool:
        """Whether an attempt that failed with `error` may be tried again at all."""
        return isinstance(error, InfraFailure)

    def should_retry(self, attempt: int, error: BaseException) -> bool:
        """Whether attempt number `attempt` (1-based), failed with `error`, gets a successor."""
        return self.is_retriable(error) and attempt < self.max_attempts

    def delay_s(self, attempt: int, key: str = "") -> float:
        """Wait after failed attempt `attempt` (1-based) before the next one.

        min(backoff_max_s, backoff_s * 2**(attempt - 1)) * (1 - jitter * u), u uniform in [0, 1)
        drawn from (seed, key, attempt).
        """
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        base = min(self.backoff_max_s, self.backoff_s * 2.0 ** min(attempt - 1, 64))
        if self.jitter == 0 or base == 0:
            return base
        draw = random.Random(f"{self.seed}:{key}:{attempt}").random()
        return base * (1.0 - self.jitter * draw)
