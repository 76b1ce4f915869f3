"""How many workers a pool should have, from its backlog and its service times.

The rule (Little's law, read backwards): a backlog of B jobs (queued + in flight) with a mean service
time S drains in B * S / W seconds on W workers; to keep that under `target_wait_s` the pool needs
W = ceil(B * S / target_wait_s) workers, never more than B (a worker without a job waits idle), and
within [min_workers, max_workers]. S is the scheduler's exponentially weighted mean of measured
service times; until one is measured the pool keeps its size (clamped into the bounds).

Against flapping: growing happens at once, shrinking only after the demand has stayed below the
current size for `scale_down_after_s`; and no two resizes come closer than `cooldown_s` (a size
outside the bounds is corrected regardless). `ScalingPolicy` remembers since when demand has been low,
so one policy serves one pool.
Not here: measuring service times (`stats.py`), applying the size (`WorkerSet.resize`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import Field, model_validator

from posttrain.config import StrictModel


class ScalingConfig(StrictModel):
    """Bounds and pace of a pool's automatic resizing (`posttrain.dist.config.AutoscaleConfig` maps here)."""

    min_workers: int = Field(1, ge=1)
    """Smallest pool size."""
    max_workers: int = Field(8, ge=1)
    """Largest pool size."""
    target_wait_s: float = Field(1.0, gt=0)
    """Time the current backlog may take to drain; more workers when it would take longer."""
    cooldown_s: float = Field(5.0, ge=0)
    """Minimum time between two resizes."""
    scale_down_after_s: float = Field(10.0, ge=0)
    """How long demand must stay below the current size before the pool shrinks."""
    interval_s: float = Field(1.0, gt=0)
    """How often a waiting driver re-evaluates the size when no result arrives."""

    @model_validator(mode="after")
    def _bounds_ordered(self) -> ScalingConfig:
        if self.min_workers > self.max_workers:
            raise ValueError(f"min_workers {self.min_workers} > max_workers {self.max_workers}")
        return self


@dataclass(frozen=True)
class PoolStats:
    """What the policy sees of a pool at one moment."""

    queue_depth: int
    """Jobs waiting in the queue (retries included)."""
    in_flight: int
    """Jobs submitted to workers and not yet settled."""
    num_workers: int
    """Current pool size."""
    service_time_s: float | None
    """Exponentially weighted mean service time of one job; None before the first is measured."""
    last_resize_s: float | None = None
    """When the pool was last resized; None if never."""


class ScalingPolicy:
    """Decides the desired size of one pool (see module docstring)."""

    def __init__(self, config: ScalingConfig) -> None:
        self.config = config
        self._low_since_s: float | None = None

    def demand(self, pool: PoolStats) -> int | None:
        """Workers the backlog needs, clamped to the bounds; None while no service time is known."""
        if pool.service_time_s is None:
            return None
        backlog = pool.queue_depth + pool.in_flight
        needed = math.ceil(backlog * pool.service_time_s / self.config.target_wait_s - 1e-9)
        return self._clamp(min(needed, backlog))

    def decide(self, pool: PoolStats, now_s: float) -> int:
        """The size the pool should have at `now_s` (its current size when no change is due)."""
        current = pool.num_workers
        clamped = self._clamp(current)
        if clamped != current:
            self._low_since_s = None
            return clamped
        wanted = self.demand(pool)
        if wanted is None or wanted >= current:
            self._low_since_s = None
        elif self._low_since_s is None:
            self._low_since_s = now_s
        cooling = pool.last_resize_s is not None and now_s - pool.last_resize_s < self.config.cooldown_s
        if wanted is None or wanted == current or cooling:
            return current
        if wanted > current:
            return wanted
        assert self._low_since_s is not None
        if now_s - self._low_since_s < self.config.scale_down_after_s:
            return current
        self._low_since_s = None
        return wanted

    def _clamp(self, num_workers: int) -> int:
        return max(self.config.min_workers, min(self.config.max_workers, num_workers))
