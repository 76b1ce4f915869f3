"""`RayEnginePool`: N rollout workers behind the `RolloutEngine` protocol.

The loop, evaluation and the episode runner use it exactly like an in-process engine. Each worker builds
its own engine from the caller's picklable factory (`posttrain.dist.actors.EngineWorker`).
`generate(requests)` cuts the requests into one contiguous slice per worker (sizes differ by at most
one; requests carry their own seeds, so a request's samples do not depend on which worker runs it, up to
the float rounding of different batch shapes), runs the slices in parallel and returns the outputs in
request order, each stamped with the weight version that produced it (`metrics["weight_version"]`).
`update_weights(state_dict, version)` puts the state in Ray's object store once and has every worker
load it. The slices are run as work items by the task scheduler (`posttrain.sched.run_jobs`): a worker
that dies during a call is replaced by a fresh one that first loads the latest weights, and its slice
runs again there (up to `max_attempts`), so the caller sees every output exactly once. With autoscaling
on, the pool is resized between calls by the scheduler's scaling policy (`posttrain.dist.scaling`).

Guarantees: outputs complete and in order; every output comes from the latest weights sent (checked:
a worker answering with another version is an error). Calls are serialised (one at a time), so a weight
update never overlaps a generation. Not here: the learner (it stays in the driver process), sampling
semantics (the engines'), conversation state across turns (`Conversation` resends the history).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from posttrain.dist.actors import EngineWorker
from posttrain.dist.config import AutoscaleConfig
from posttrain.dist.scaling import PoolScaler
from posttrain.dist.workers import Call, RayWorkerSet, WorkerLost, WorkerOptions
from posttrain.rollout.api import Conversation, GenerationRequest, RequestOutput, RolloutEngine
from posttrain.sched import RetryPolicy, SchedConfig, WorkItem, run_jobs

MAX_COUNTERS = ("max_", "peak_", "weight_version", "kv_blocks_total")
"""Engine counters merged across workers by max instead of sum."""


class RayEnginePool:
    """A `RolloutEngine` over `num_workers` Ray rollout workers (see module docstring)."""

    def __init__(self, factory: Callable[[], RolloutEngine], num_workers: int,
                 options: WorkerOptions = WorkerOptions(), max_attempts: int = 3,
                 autoscale: AutoscaleConfig | None = None) -> None:  # fmt: skip
        self.version: int | None = None
        """The weight version every worker holds (None: the factory's own weights)."""
        self.sched = SchedConfig(retry=RetryPolicy(max_attempts=max_attempts, backoff_s=0.0))
        self.scaler = PoolScaler(autoscale or AutoscaleConfig())
        self._weights: Any = None  # object ref of the latest state dict
        self._lock = threading.Lock()
        self.workers = RayWorkerSet(EngineWorker, factory, num_workers, options, self._bring_up, name="rollout")

    def generate(self, requests: Sequence[GenerationRequest]) -> list[RequestOutput]:
        if not requests:
            return []
        with self._lock:
            self._autoscale(len(requests))
            slices = _contiguous_slices(len(requests), self.workers.num_workers)
            start_s = time.perf_counter()
            items = [WorkItem(f"slice-{a}", "generate", "rollout", Call("generate", (list(requests[a:b]),)))
                     for a, b in slices]  # fmt: skip
            outcomes = run_jobs(items, self.workers, self.sched)
            self.scaler.observe(len(requests), self.workers.num_workers, time.perf_counter() - start_s)
            self.workers.refill()
        outputs: list[RequestOutput] = []
        for outcome in outcomes:
            if outcome.status != "ok":
                raise WorkerLost(f"rollout slice {outcome.status} after {outcome.attempts} attempts: {outcome.error}")
            version, slice_outputs = outcome.value
            if version != self.version:
                raise RuntimeError(f"a rollout worker answered with weights v{version}, expected v{self.version}")
            outputs.extend(slice_outputs)
        if self.version is not None:
            for output in outputs:
                output.metrics["weight_version"] = float(self.version)
        return outputs

    def update_weights(self, state_dict: Mapping[str, Any], version: int | None = None) -> None:
        import ray

        with self._lock:
            self.version = (0 if self.version is None else self.version + 1) if version is None else version
            self._weights = ray.put({name: _host_copy(t) for name, t in state_dict.items()})
            pending = self.workers.broadcast(Call("update_weights", (self._weights, self.version)))
            for future in pending:
                error = future.exception()
                if error is not None and not isinstance(error, WorkerLost):
                    raise error
            self.workers.refill()  # a worker lost here is replaced, and its replacement loads these weights

    def stats(self) -> dict[str, float]:
        """Every worker's engine counters merged (summed; maxima and versions by max), plus the pool's."""
        with self._lock:
            futures = self.workers.broadcast(Call("stats"))
        merged: dict[str, float] = {}
        for future in futures:
            if future.exception() is not None:
                continue
            for key, value in future.result().items():
                is_max = key.startswith(MAX_COUNTERS)
                merged[key] = max(merged.get(key, value), value) if is_max else merged.get(key, 0.0) + value
        merged["workers"] = float(self.workers.num_workers)
        merged["workers_replaced"] = float(self.workers.num_replaced)
        return merged

    def open_conversation(self) -> Conversation:
        return Conversation(self)

    def close(self) -> None:
        self.workers.close(Call("close"))

    # ---------------------------------------------------------------------------------- internals
    def _bring_up(self, handle: Any) -> None:
        """A new worker first loads the latest weights (runs before any call submitted after it)."""
        if self._weights is not None:
            assert self.version is not None
            handle.update_weights.remote(self._weights, self.version)

    def _autoscale(self, num_requests: int) -> None:
        size = self.scaler.size_for(num_requests, self.workers.num_workers)
        if size != self.workers.num_workers:
            self.workers.resize(size)


def _contiguous_slices(num_items: int, num_parts: int) -> list[tuple[int, int]]:
    """[start, end) of min(num_parts, num_items) contiguous slices whose sizes differ by at most one."""
    parts = max(1, min(num_parts, num_items))
    size, extra = divmod(num_items, parts)
    bounds, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def _host_copy(tensor: Any) -> Any:
    """A tensor detached and on the host (no copy for one already there), so any worker can load it."""
    detach = getattr(tensor, "detach", None)
    return detach().cpu() if detach is not None else tensor
