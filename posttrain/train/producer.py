"""The asynchronous producer: one background thread makes step k+1's data while the learner updates on k.

`AheadProducer.collect(step)` returns the data of `step` (made ahead, or made now when nothing was) and
starts making `step + 1`, so a loop that calls `collect` once per step keeps its synchronous shape.
Only the producer thread generates: weights posted with `post_weights` are not applied at once but
handed to the next job, which loads them into the engine before it generates (the latest post wins);
`drain()` waits for the job in flight and applies what is pending, after which the caller may use the
engine itself (evaluation) or save state (checkpoints).

Guarantees: at most one job runs at a time, and jobs run in step order; which weights a job uses depends
only on the order of calls, never on timing (a job started by `collect(k)` sees exactly the weights
posted before that call), so a run is reproducible; an exception raised in a job is raised again in
the caller by the `collect` or `drain` that waits for it; `close()` leaves no thread behind (it waits
for a job in flight, which cannot be interrupted). Not here: what a job makes (the caller's `make`),
the staleness rule (`posttrain.sched.staleness`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

WeightState = Mapping[str, Any]
"""A policy state dict as weight sync sends it."""


class AheadProducer(Generic[T]):
    """Makes `make(step, version)` one step ahead in a single thread (see the module docstring).

    `load_weights(state, version)` puts weights into the engine the jobs generate with; `version` is
    the weight version the engine holds now; steps run up to `num_steps - 1`."""

    def __init__(self, make: Callable[[int, int], T], load_weights: Callable[[WeightState, int], None],
                 version: int, num_steps: int) -> None:  # fmt: skip
        self._make = make
        self._load_weights = load_weights
        self.version = version
        """Weight version the engine holds (written only while no job runs, or by the job itself)."""
        self._num_steps = num_steps
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="posttrain-producer")
        self._future: Future[tuple[T, float]] | None = None
        self._future_step = -1
        self._pending: tuple[WeightState, int] | None = None
        self._ready: dict[int, tuple[T, float]] = {}

    def collect(self, step: int) -> tuple[T, float]:
        """The data of `step` and the seconds its making overlapped the caller's work; starts `step + 1`."""
        if step not in self._ready:
            if self._future is None or self._future_step != step:
                self._wait()  # a job for another step (a restored run): finish it first
                self._submit(step)
            self._wait()
        data, overlap_s = self._ready.pop(step)
        if step + 1 < self._num_steps:
            self._submit(step + 1)
        return data, overlap_s

    def post_weights(self, state: WeightState, version: int) -> None:
        """Weights for the next job (not applied now: a job may be generating); the latest post wins."""
        self._pending = (state, version)

    def drain(self) -> None:
        """Wait for the job in flight (its data is kept for `collect`) and apply pending weights: the
        engine is idle and current afterwards, until the next `collect`."""
        self._wait()
        if self._pending is not None:
            state, version = self._pending
            self._pending = None
            self._load_weights(state, version)
            self.version = version

    def ready(self) -> dict[int, T]:
        """The data made ahead and not yet collected, by step (call `drain()` first)."""
        return {step: data for step, (data, _) in self._ready.items()}

    def restore(self, ready: Mapping[int, T]) -> None:
        """Data made ahead by an earlier process (a checkpoint's), collected as if made here."""
        self._ready.update({step: (data, 0.0) for step, data in ready.items()})

    def close(self) -> None:
        """Stop the thread; a job in flight runs to its end first, its result or error discarded."""
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._future = None

    def _submit(self, step: int) -> None:
        pending, self._pending = self._pending, None
        self._future = self._executor.submit(self._job, step, pending)
        self._future_step = step

    def _wait(self) -> None:
        if self._future is None:
            return
        future, step = self._future, self._future_step
        start_s = time.perf_counter()
        try:
            data, run_s = future.result()
        finally:
            self._future = None
        waited_s = time.perf_counter() - start_s
        self._ready[step] = (data, max(run_s - waited_s, 0.0))

    def _job(self, step: int, pending: tuple[WeightState, int] | None) -> tuple[T, float]:
        start_s = time.perf_counter()
        if pending is not None:
            self._load_weights(*pending)
            self.version = pending[1]
        data = self._make(step, self.version)
        return data, time.perf_counter() - start_s
