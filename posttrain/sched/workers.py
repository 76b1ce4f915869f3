"""The worker-set protocol the scheduler submits to, and its local implementation over threads.

A `WorkerSet` runs one `WorkItem` per `submit` and answers with a future. The future fails with
`InfraFailure` when the worker running it died or crashed (the set replaces that worker itself); any
other exception means the work itself failed. A set may name the worker that ran an attempt by setting
`worker` on the future (`WorkFuture`), which ends up in `Outcome.worker`.

`ThreadWorkerSet` runs a function in a resizable set of daemon threads fed by one FIFO. Growing starts
threads at once; shrinking lets surplus threads finish their current item and exit. A thread stuck in
the function cannot be killed: it keeps its slot (and counts towards the size) until the call returns,
so a hung item costs one worker until then. `close` cancels items not yet started and lets the threads
exit after their current item; it does not wait for them.
Not here: deadlines, retries, ordering (the scheduler); processes or Ray actors (`posttrain.dist`).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from posttrain.sched.items import WorkItem


class WorkerSet(Protocol):
    """Where the scheduler runs work (see module docstring)."""

    def submit(self, item: WorkItem) -> concurrent.futures.Future[Any]:
        """Start `item` (or queue it inside the set); the future holds its value or its error."""
        ...

    @property
    def num_workers(self) -> int:
        """The set's current size (the scheduler keeps about this many items in flight)."""
        ...

    def resize(self, num_workers: int) -> None:
        """Grow or shrink to `num_workers`; items already running are not interrupted."""
        ...

    def close(self) -> None:
        """Stop taking work and release the workers."""
        ...


class WorkFuture(concurrent.futures.Future[Any]):
    """A future that names the worker that ran it."""

    worker: str = ""


class ThreadWorkerSet:
    """`fn` run in `num_workers` threads (see module docstring)."""

    def __init__(self, fn: Callable[[WorkItem], Any], num_workers: int, name: str = "worker") -> None:
        self._fn = fn
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[tuple[WorkItem, WorkFuture]] = deque()
        self._threads: dict[str, threading.Thread] = {}
        self._ids = itertools.count()
        self._target = 0
        self._closed = False
        self.resize(num_workers)

    @property
    def num_workers(self) -> int:
        return self._target

    @property
    def num_threads(self) -> int:
        """Threads alive now (above `num_workers` while surplus ones finish their item)."""
        with self._cond:
            return len(self._threads)

    def submit(self, item: WorkItem) -> concurrent.futures.Future[Any]:
        future = WorkFuture()
        with self._cond:
            if self._closed:
                raise RuntimeError("submit to a closed ThreadWorkerSet")
            self._queue.append((item, future))
            self._cond.notify()
        return future

    def resize(self, num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError(f"a worker set needs at least one worker, got {num_workers}")
        with self._cond:
            if self._closed:
                raise RuntimeError("resize of a closed ThreadWorkerSet")
            self._target = num_workers
            while len(self._threads) < num_workers:
                name = f"{self._name}-{next(self._ids)}"
                thread = threading.Thread(target=self._serve, args=(name,), name=name, daemon=True)
                self._threads[name] = thread
                thread.start()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for _, future in pending:
            future.cancel()

    def _serve(self, name: str) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._queue and len(self._threads) <= self._target:
                    self._cond.wait()
                if self._closed or len(self._threads) > self._target:
                    del self._threads[name]
                    return
                item, future = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            future.worker = name
            try:
                value = self._fn(item)
            except Exception as exc:  # the future carries it; the thread serves on
                future.set_exception(exc)
            else:
                future.set_result(value)
