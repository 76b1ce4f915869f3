"""`PoolScaler`: how many workers a pool should have for its next call, from its measured service time.

Between two calls of a pool (never during one), the scaler sizes it so that the next call's items,
spread over the workers, take about `target_wait_s`: workers = ceil(items x seconds per item /
target_wait_s), clamped to [min_workers, max_workers], changed at most once per `cooldown_s`. The seconds
per item are a moving average (weight 1/2 on the newest call) of wall time x workers / items.
Pure bookkeeping: the pools apply the size (`RayWorkerSet.resize`).
Not here: resizing inside a call, queue depth across stages (the task scheduler's policy).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from posttrain.dist.config import AutoscaleConfig


class PoolScaler:
    """The size of one pool from its load (see module docstring); a disabled config keeps the size."""

    def __init__(self, config: AutoscaleConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
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
        cfg = self.config
        if not cfg.enabled or self.item_s is None or num_items <= 0:
            return current
        now = self.clock()
        if self._last_resize_s is not None and now - self._last_resize_s < cfg.cooldown_s:
            return current
        wanted = math.ceil(num_items * self.item_s / cfg.target_wait_s)
        size = min(max(wanted, cfg.min_workers), cfg.max_workers)
        if size != current:
            self._last_resize_s = now
        return size
