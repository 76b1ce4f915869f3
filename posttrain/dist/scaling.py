"""`PoolScaler`: a pool's size for its next call, decided by the task scheduler's scaling policy.

`AutoscaleConfig` (the `dist.autoscale` section) maps onto `posttrain.sched.ScalingConfig`
(`scaling_config`), and `posttrain.sched.ScalingPolicy` decides. A pool asks between two calls, never
during one: the backlog is the next call's items and the service time a moving average (weight 1/2 on
the newest call) of worker-seconds per item, wall time x workers / items, measured on earlier calls.
So the policy's rule holds per call: about ceil(items x seconds per item / target_wait_s) workers,
within [min_workers, max_workers], growing at once, shrinking only after `scale_down_after_s` of low
demand, at most one resize per `cooldown_s`.
Pure bookkeeping: the pools apply the size (`RayWorkerSet.resize`).
Not here: the rule itself (`posttrain.sched.scaling`); resizing inside a call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from posttrain.dist.config import AutoscaleConfig
from posttrain.sched import PoolStats, ScalingConfig, ScalingPolicy


def scaling_config(config: AutoscaleConfig) -> ScalingConfig:
    """The scheduler's scaling config for `dist.autoscale`."""
    return ScalingConfig(min_workers=config.min_workers, max_workers=config.max_workers,
                         target_wait_s=config.target_wait_s, cooldown_s=config.cooldown_s)  # fmt: skip


class PoolScaler:
    """The size of one pool from its load (see module docstring); a disabled config keeps the size."""

    def __init__(self, config: AutoscaleConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = ScalingPolicy(scaling_config(config)) if config.enabled else None
        self.clock = clock
        self.item_s: float | None = None
        """Moving average of worker-seconds per item; None until a call was observed."""
        self._last_resize_s: float | None = None

    def observe(self, num_items: int, num_workers: int, elapsed_s: float) -> None:
        """Record one call: `num_items` items took `elapsed_s` on `num_workers` workers."""
        if num_items <= 0:
            return
        item_s = elapsed_s * num_workers / num_items
        self.item_s = item_s if self.item_s is None else 0.5 * (self.item_s + item_s)

    def size_for(self, num_items: int, current: int) -> int:
        """Workers for a call of `num_items` items, given `current` workers now."""
        if self.policy is None or num_items <= 0:
            return current
        now = self.clock()
        size = self.policy.decide(PoolStats(num_items, 0, current, self.item_s, self._last_resize_s), now)
        if size != current:
            self._last_resize_s = now
        return size
