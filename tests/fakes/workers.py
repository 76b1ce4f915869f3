"""A worker set that runs each item inside `submit` (one serial worker, however many it claims), and a
hand-driven clock: scheduler runs whose every event order and time is fixed by the test."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from posttrain.sched import WorkFuture, WorkItem


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now_s: float = 0.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


class InlineWorkerSet:
    """Runs `fn(item)` synchronously in `submit`; the returned future is already settled."""

    def __init__(self, fn: Callable[[WorkItem], Any], num_workers: int = 1) -> None:
        self.fn = fn
        self.submitted: list[WorkItem] = []
        self.sizes: list[int] = []
        self.closed = False
        self._num_workers = num_workers

    @property
    def num_workers(self) -> int:
        return self._num_workers

    def submit(self, item: WorkItem) -> concurrent.futures.Future[Any]:
        self.submitted.append(item)
        future = WorkFuture()
        future.worker = "inline"
        future.set_running_or_notify_cancel()
        try:
            future.set_result(self.fn(item))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def resize(self, num_workers: int) -> None:
        self.sizes.append(num_workers)
        self._num_workers = num_workers

    def close(self) -> None:
        self.closed = True
