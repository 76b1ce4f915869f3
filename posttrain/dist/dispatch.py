"""`run_calls`: a list of calls over a worker set (`RayWorkerSet`), each settled exactly once, results in order.

At most one call per worker is in flight (a free worker takes the next call, so faster workers take
more). A call whose worker died (`WorkerLost`) runs again on a fresh worker, up to `max_attempts`
attempts; a call still running `timeout_s` after it started is abandoned (its worker is killed and
replaced) and settles as `expired` without another attempt, since a call that hung once (a verifier
stuck on one input) would most likely hang again. Any other exception the call raised is a bug and
propagates to the caller.

Guarantees: one `Settled` per call, in the order of the calls; a result is taken from one attempt only
(late answers of abandoned attempts are ignored). Not here: fair share between domains, priorities
and scaling (the task scheduler's business); what a failed call means to the caller.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from posttrain.dist.workers import Call, WorkerLost

SettledStatus = Literal["ok", "infra_failed", "expired"]
"""ok: a value; infra_failed: every attempt lost its worker; expired: the attempt ran past timeout_s."""


class WorkerSet(Protocol):
    """What `run_calls` needs of a worker set (`posttrain.dist.workers.RayWorkerSet`)."""

    @property
    def num_workers(self) -> int: ...

    def submit(self, call: Call) -> Future[Any]: ...

    def abandon(self, future: Future[Any]) -> None: ...


@dataclass(frozen=True)
class Settled:
    """How one call ended."""

    value: Any
    """The method's return value when ok, else None."""
    status: SettledStatus
    attempts: int
    """Attempts made, the settling one included."""
    error: str = ""
    """The last failure, empty when ok."""


def run_calls(calls: Sequence[Call], workers: WorkerSet, max_attempts: int, timeout_s: float | None = None,
              clock: Callable[[], float] = time.monotonic) -> list[Settled]:  # fmt: skip
    """Run every call (see module docstring); returns one `Settled` per call, in order."""
    settled: list[Settled | None] = [None] * len(calls)
    attempts = [0] * len(calls)
    queue = deque(range(len(calls)))
    in_flight: dict[Future[Any], tuple[int, float]] = {}
    while queue or in_flight:
        while queue and len(in_flight) < max(workers.num_workers, 1):
            index = queue.popleft()
            attempts[index] += 1
            in_flight[workers.submit(calls[index])] = (index, clock())
        done, _ = wait(list(in_flight), timeout=_wait_s(in_flight, timeout_s, clock), return_when=FIRST_COMPLETED)
        for future in done:
            index, _ = in_flight.pop(future)
            error = future.exception()
            if error is None:
                settled[index] = Settled(future.result(), "ok", attempts[index])
            elif not isinstance(error, WorkerLost):
                raise error
            elif attempts[index] < max_attempts:
                queue.appendleft(index)
            else:
                settled[index] = Settled(None, "infra_failed", attempts[index], str(error))
        for future, (index, start) in list(in_flight.items()):
            if timeout_s is not None and clock() - start >= timeout_s:
                del in_flight[future]
                workers.abandon(future)
                settled[index] = Settled(None, "expired", attempts[index], f"ran past its {timeout_s:g} s deadline")
    assert all(s is not None for s in settled)
    return [s for s in settled if s is not None]


def _wait_s(in_flight: dict[Future[Any], tuple[int, float]], timeout_s: float | None,
            clock: Callable[[], float]) -> float | None:  # fmt: skip
    """Seconds until the earliest deadline among the calls in flight (None: no deadline)."""
    if timeout_s is None or not in_flight:
        return None
    return max(0.0, min(start for _, start in in_flight.values()) + timeout_s - clock())
