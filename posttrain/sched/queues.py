"""The bounded, per-domain fair-share queue the scheduler draws work from.

Each domain has its own sub-queue ordered by (priority, retries before fresh items, arrival). `pop`
takes the best priority present among the domains it may draw from, and among the domains whose head
has that priority, the one furthest behind in fair share: stride scheduling, where drawing an item
advances its domain's pass by `cost / weight` and the smallest pass goes next. A domain that has been
idle re-enters at the current virtual time (the pass of the last item drawn), so idleness earns no
credit to burst with later. With equal weights and costs, a flood of one domain and a trickle of
another alternate one for one.

Guarantees: `offer` never lets the queue hold more than `max_items` fresh items (it returns False, the
caller holds off: backpressure); `requeue` (a retry of an admitted job) always succeeds and may wait
until a time given in `ready_at_s`. A domain with `in_flight_by_domain[d] >= quota[d]` is skipped.
Deterministic: ties break by the order in which domains were first seen.
Not here: the clock, the workers, or what counts as in flight (the caller passes the counts).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping

from posttrain.sched.items import WorkItem

_RETRY, _FRESH = 0, 1


class FairQueue:
    """Per-domain priority sub-queues drawn by weighted fair share (see module docstring)."""

    def __init__(self, max_items: int, weights: Mapping[str, float] | None = None,
                 quotas: Mapping[str, int] | None = None) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, got {max_items}")
        for domain, weight in (weights or {}).items():
            if weight <= 0:
                raise ValueError(f"domain {domain!r}: weight must be positive, got {weight}")
        for domain, quota in (quotas or {}).items():
            if quota < 1:
                raise ValueError(f"domain {domain!r}: quota must be at least 1, got {quota}")
        self.max_items = max_items
        self._weights = dict(weights or {})
        self._quotas = dict(quotas or {})
        self._ready: dict[str, list[tuple[int, int, int, WorkItem]]] = {}
        self._delayed: list[tuple[float, int, WorkItem]] = []
        self._pass: dict[str, float] = {}
        self._order: dict[str, int] = {}
        self._virtual_time = 0.0
        self._seq = itertools.count()
        self._num_items = 0

    def __len__(self) -> int:
        """Items held, waiting retries included."""
        return self._num_items

    def has_capacity(self) -> bool:
        """Whether `offer` would accept an item now."""
        return self._num_items < self.max_items

    def offer(self, item: WorkItem) -> bool:
        """Queue a fresh item; False (and nothing queued) when the queue is full."""
        if not self.has_capacity():
            return False
        self._push(item, _FRESH)
        return True

    def requeue(self, item: WorkItem, ready_at_s: float = float("-inf")) -> None:
        """Queue a retry of an admitted item, ahead of fresh items of its priority, from `ready_at_s` on.

        Ignores the bound: the job was admitted once and must be able to finish.
        """
        heapq.heappush(self._delayed, (ready_at_s, next(self._seq), item))
        self._num_items += 1

    def next_ready_s(self) -> float | None:
        """When the earliest waiting retry becomes ready; None when none waits (`release` first to
        leave out those already due)."""
        return self._delayed[0][0] if self._delayed else None

    def depth_by_domain(self) -> dict[str, int]:
        """Items held per domain (waiting retries included); domains with none are left out."""
        depth = {domain: len(heap) for domain, heap in self._ready.items() if heap}
        for _, _, item in self._delayed:
            depth[item.domain_id] = depth.get(item.domain_id, 0) + 1
        return depth

    def pop(self, now_s: float, in_flight_by_domain: Mapping[str, int] | None = None) -> WorkItem | None:
        """The next item to run at `now_s`, or None when nothing ready may run (empty, waiting, quotas)."""
        self.release(now_s)
        domain = self._choose(in_flight_by_domain or {})
        if domain is None:
            return None
        item = heapq.heappop(self._ready[domain])[3]
        self._num_items -= 1
        self._virtual_time = self._pass[domain]
        self._pass[domain] += item.cost / self._weights.get(domain, 1.0)
        return item

    def _push(self, item: WorkItem, rank: int) -> None:
        domain = item.domain_id
        heap = self._ready.setdefault(domain, [])
        self._order.setdefault(domain, len(self._order))
        if not heap:  # (re)entering: no credit for the time it was idle
            self._pass[domain] = max(self._pass.get(domain, 0.0), self._virtual_time)
        heapq.heappush(heap, (item.priority, rank, next(self._seq), item))
        self._num_items += 1

    def release(self, now_s: float) -> None:
        """Make the retries due by `now_s` ready to pop (`pop` does this itself)."""
        while self._delayed and self._delayed[0][0] <= now_s:
            item = heapq.heappop(self._delayed)[2]
            self._num_items -= 1
            self._push(item, _RETRY)

    def _choose(self, in_flight: Mapping[str, int]) -> str | None:
        best: tuple[int, float, int] | None = None
        chosen = None
        for domain, heap in self._ready.items():
            if not heap or in_flight.get(domain, 0) >= self._quotas.get(domain, 1 << 62):
                continue
            key = (heap[0][0], self._pass[domain], self._order[domain])
            if best is None or key < best:
                best, chosen = key, domain
        return chosen
