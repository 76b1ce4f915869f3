"""The records the scheduler moves: a unit of work, its final outcome, and the one retriable error.

Guarantees: `WorkItem` and `Outcome` are frozen; a work item's `job_id` names the job across all of
its attempts, so every layer (queue, ledger, workers) can recognise a retry or a late duplicate.
The failure classes are two and only two: `InfraFailure` (the worker died, the sandbox crashed, the
harness timed out) is retried; any other exception raised by the work is the model's or the user's
error, final on the first attempt.
Not here: how items are ordered (`queues.py`), retried (`retry.py`) or committed (`ledger.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

WorkKind = Literal["generate", "episode", "verify", "sandbox"]
"""The stage a work item belongs to; service times are tracked per kind."""

OutcomeStatus = Literal["ok", "model_error", "infra_failed", "expired"]
"""ok: a value; model_error: the work raised (final); infra_failed / expired: every attempt failed on
infrastructure, the last one by raising `InfraFailure` / by overrunning its deadline."""


@dataclass(frozen=True)
class WorkItem:
    """One job: what to run, for which domain, how urgent, how long one attempt may take."""

    job_id: str
    """Unique within a run and the same for every attempt of the job."""
    kind: WorkKind
    """The stage (generation, an agent episode, verification, a sandbox run)."""
    domain_id: str
    """The domain the job serves; fair share and quotas are per domain."""
    payload: Any
    """Whatever the work function needs; the scheduler never looks inside."""
    priority: int = 0
    """Lower runs first; strict across domains, fair share only among equal priorities."""
    deadline_s: float | None = None
    """Longest one attempt may run, counted from its submission; None: no limit."""
    cost: float = 1.0
    """What one attempt charges its domain's fair share (e.g. expected tokens or seconds)."""

    def __post_init__(self) -> None:
        if not self.job_id:
            raise ValueError("WorkItem.job_id must be non-empty")
        if self.cost <= 0:
            raise ValueError(f"WorkItem {self.job_id}: cost must be positive, got {self.cost}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise ValueError(f"WorkItem {self.job_id}: deadline_s must be positive, got {self.deadline_s}")


class InfraFailure(Exception):
    """The infrastructure failed, not the work: worker died, sandbox crashed, harness timed out.

    Retried with backoff up to the retry policy's `max_attempts`. Raise it (or have the worker set fail
    the future with it) only when running the same item again could succeed.
    """


class DeadlineExceeded(InfraFailure):
    """An attempt ran past its item's `deadline_s` and was abandoned (an infra failure of the harness)."""


@dataclass(frozen=True)
class Outcome:
    """The committed, final result of one job."""

    job_id: str
    """The job this settles."""
    value: Any
    """The work function's return value when `status == "ok"`, else None."""
    attempts: int
    """Attempts made, the committed one included (1 when the first attempt settled the job)."""
    status: OutcomeStatus
    """How the job ended (see `OutcomeStatus`)."""
    error: str = ""
    """The last error as `Type: message`; empty when ok."""
    worker: str = ""
    """The worker that ran the committed attempt, when the worker set names it."""

    @property
    def is_ok(self) -> bool:
        return self.status == "ok"


def describe_error(error: BaseException) -> str:
    """`Type: message`, the form `Outcome.error` takes."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
