"""`RayWorkerSet`: a pool of Ray actors of one kind that replaces its dead members; a sched `WorkerSet`.

`submit(item)` runs the item's payload, a `Call` (`method(*args)`), on the least busy live actor and
returns a future naming that actor (`WorkFuture.worker`). When the actor dies during the call (killed,
crashed, its node lost), the future fails with `WorkerLost`, an `InfraFailure` (so the scheduler retries
the item), and the actor is marked dead; the next `submit`, `broadcast` or `refill` starts a fresh one
in its place, first handing it to `on_start` (e.g. to load the latest weights: calls from this process
to one actor run in the order they were made, so what `on_start` sends runs before anything submitted
after). Any other exception raised by the method fails the future as it is. Cancelling a future whose
call has not settled kills its actor (the scheduler cancels an attempt past its deadline: a hung actor
is replaced, not left holding its slot). `broadcast(call)` runs a call once on every actor. `resize(n)`
adds actors or retires the surplus (idle ones at the next refill, busy ones once their call ends).

Guarantees: the set never runs a call twice by itself (retrying is the scheduler's choice); after
`refill()` there are `num_workers` live actors. Thread-safe. Ray is imported inside the methods.
Not here: ordering, retries, deadlines (`posttrain.sched.run_jobs`); what the actors hold (`actors`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from posttrain.sched import InfraFailure, WorkFuture, WorkItem


class WorkerLost(InfraFailure):
    """The worker died while running the call (running it again, on a fresh worker, may succeed)."""


@dataclass(frozen=True)
class Call:
    """A method of the worker and its positional arguments (Ray object refs are resolved in the worker):
    the payload of the `WorkItem`s a `RayWorkerSet` runs."""

    method: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class WorkerOptions:
    """Where and with which resources the set's actors run."""

    num_cpus: float | None = None
    """CPUs held per actor; None: Ray's default for actors."""
    num_gpus: float = 0.0
    """GPUs per actor."""
    spread: bool = True
    """Place actors on as many nodes as possible (Ray's SPREAD strategy)."""

    def ray_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
        # Only resources asked for are named: naming any (even num_gpus=0) makes Ray hold a CPU per actor.
        if self.num_cpus is not None:
            options["num_cpus"] = self.num_cpus
        if self.num_gpus > 0:
            options["num_gpus"] = self.num_gpus
        if self.spread:
            options["scheduling_strategy"] = "SPREAD"
        return options


def lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's exceptions that mean the worker (or its node) is gone rather than that the call raised."""
    from ray import exceptions as e

    return (e.RayActorError, e.WorkerCrashedError, e.NodeDiedError, e.ObjectLostError, e.OutOfMemoryError)


@dataclass(eq=False)
class _Slot:
    name: str
    handle: Any
    busy: int = 0
    alive: bool = True
    retiring: bool = False
    calls: set[Future[Any]] = field(default_factory=set)


class RayWorkerSet:
    """`num_workers` actors of `worker_class`, each built from `factory` (see module docstring)."""

    def __init__(self, worker_class: type, factory: Callable[[], Any], num_workers: int,
                 options: WorkerOptions = WorkerOptions(), on_start: Callable[[Any], None] | None = None,
                 name: str = "worker") -> None:  # fmt: skip
        import ray

        self._remote_class: Any = ray.remote(worker_class).options(**options.ray_options())
        self._factory = factory
        self._on_start = on_start
        self._name = name
        self._ids = itertools.count()
        # Two locks: `_lock` orders the set's own operations and may be held across Ray calls; `_state`
        # guards the slots' counters only and is never held across one, because Ray settles calls on its
        # own thread (`_settle`), which must never wait for a thread that waits for Ray.
        self._lock = threading.RLock()
        self._state = threading.Lock()
        self._slots: list[_Slot] = []
        self._target = num_workers
        self.num_replaced = 0
        """Actors started in place of dead or abandoned ones."""
        self.refill()

    @property
    def num_workers(self) -> int:
        """The size the set keeps (live actors after `refill`)."""
        return self._target

    @property
    def num_live(self) -> int:
        return len(self._live())

    def handles(self) -> dict[str, Any]:
        """Live actors by name (for inspection and fault tests)."""
        return {s.name: s.handle for s in self._live()}

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Block until every live actor has built what it holds (refilling first); raises TimeoutError
        after `timeout_s` (e.g. when the cluster lacks the resources to place them: Ray waits forever)."""
        import ray

        with self._lock:
            self.refill()
            refs = [s.handle.pid.remote() for s in self._live()]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        if len(ready) < len(refs):
            raise TimeoutError(f"{len(refs) - len(ready)} of {len(refs)} {self._name} workers not started after "
                               f"{timeout_s} s: does the cluster have the CPUs/GPUs they ask for?")
        ray.get(ready)  # raises if a worker died while starting

    def refill(self) -> None:
        """Stop idle retired actors, drop dead ones and start new ones until `num_workers` are live."""
        with self._lock:
            with self._state:
                idle_retired = [s for s in self._slots if s.retiring and s.alive and not s.busy]
            for slot in idle_retired:
                self._kill(slot)
            with self._state:
                lost = sum(not s.alive and not s.retiring for s in self._slots)
                self._slots = [s for s in self._slots if s.alive]
                missing = self._target - sum(not s.retiring for s in self._slots)
                self.num_replaced += min(lost, max(missing, 0))
            for _ in range(missing):
                slot = self._start()
                with self._state:
                    self._slots.append(slot)

    def submit(self, item: WorkItem) -> Future[Any]:
        """Run `item.payload` (a `Call`) on the least busy live actor (see module docstring)."""
        with self._lock:
            self.refill()
            with self._state:
                slot = min(self._live_locked(), key=lambda s: s.busy)
            return self._run(slot, item.payload)

    def broadcast(self, call: Call) -> list[Future[Any]]:
        """Run `call` once on every live actor."""
        with self._lock:
            self.refill()
            return [self._run(s, call) for s in self._live()]

    def resize(self, num_workers: int) -> None:
        """Keep `num_workers` actors from now on: start new ones, or retire the surplus."""
        if num_workers < 1:
            raise ValueError(f"a worker set needs at least one worker, got {num_workers}")
        with self._lock:
            self._target = num_workers
            with self._state:
                live = sorted(self._live_locked(), key=lambda s: s.busy)
                for slot in live[: max(0, len(live) - num_workers)]:
                    slot.retiring = True
            self.refill()

    def close(self, close_call: Call | None = None, timeout_s: float = 30.0) -> None:
        """Stop every actor; `close_call` first gives each a chance to release what it holds."""
        import ray

        with self._lock, self._state:
            slots, self._slots, self._target = self._slots, [], 0
        live = [s for s in slots if s.alive]
        if close_call is not None and live:
            refs = [getattr(s.handle, close_call.method).remote(*close_call.args) for s in live]
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for slot in live:
            ray.kill(slot.handle, no_restart=True)

    # ---------------------------------------------------------------------------------- internals
    def _live(self) -> list[_Slot]:
        with self._state:
            return self._live_locked()

    def _live_locked(self) -> list[_Slot]:
        return [s for s in self._slots if s.alive and not s.retiring]

    def _start(self) -> _Slot:
        slot = _Slot(f"{self._name}-{next(self._ids)}", self._remote_class.remote(self._factory))
        if self._on_start is not None:
            self._on_start(slot.handle)
        return slot

    def _run(self, slot: _Slot, call: Call) -> Future[Any]:
        result = WorkFuture()
        result.worker = slot.name
        with self._state:
            slot.busy += 1
            slot.calls.add(result)
        ref = getattr(slot.handle, call.method).remote(*call.args)
        result.add_done_callback(lambda future: self._abandon(slot, future))
        ref.future().add_done_callback(lambda done: self._settle(slot, done, result))
        return result

    def _settle(self, slot: _Slot, done: Future[Any], result: Future[Any]) -> None:
        """Runs on Ray's thread (or at once when already settled): bookkeeping only, no Ray calls."""
        error = done.exception()
        lost = error is not None and isinstance(error, lost_errors())
        with self._state:
            slot.busy -= 1
            slot.calls.discard(result)
            if lost:
                slot.alive = False  # replaced by the next refill, in the caller's thread
        try:
            if error is None:
                result.set_result(done.result())
            elif lost:
                result.set_exception(WorkerLost(f"{slot.name} lost: {type(error).__name__}: {error}"))
            else:
                result.set_exception(error)
        except InvalidStateError:
            pass  # cancelled meanwhile: the caller gave up on this call

    def _abandon(self, slot: _Slot, future: Future[Any]) -> None:
        """A call cancelled before it settled: kill its actor (runs in the cancelling thread)."""
        if not future.cancelled():
            return
        with self._state:
            running = future in slot.calls and slot.alive
            slot.calls.discard(future)
        if running:
            self._kill(slot)

    def _kill(self, slot: _Slot) -> None:
        import ray

        with self._state:
            slot.alive = False
        ray.kill(slot.handle, no_restart=True)
