"""The record of settled jobs: each job id is committed exactly once.

Guarantees: `commit` accepts the first outcome of a job and refuses (returns False, changes nothing
but a counter) any later one, so a late duplicate from a worker presumed dead is never counted twice.
An attempt revoked with `revoke` (abandoned after its deadline) can never commit, even when its job
is still open. The counters say how many commits were accepted and how many were refused, and why.
Not here: deciding an outcome (the scheduler does), persistence across processes (one run's memory).
"""

from __future__ import annotations

from collections.abc import Iterator

from posttrain.sched.items import Outcome


class ResultLedger:
    """Exactly-once commit of outcomes by job id."""

    def __init__(self) -> None:
        self._outcomes: dict[str, Outcome] = {}
        self._revoked: set[tuple[str, int]] = set()
        self.num_committed = 0
        """Outcomes accepted."""
        self.num_duplicates = 0
        """Commits refused because the job was already committed."""
        self.num_revoked_results = 0
        """Commits refused because their attempt had been revoked (late results of abandoned attempts)."""

    def revoke(self, job_id: str, attempt: int) -> None:
        """Forbid attempt `attempt` of `job_id` from ever committing (it was abandoned)."""
        self._revoked.add((job_id, attempt))

    def is_revoked(self, job_id: str, attempt: int) -> bool:
        return (job_id, attempt) in self._revoked

    def commit(self, job_id: str, attempt: int, outcome: Outcome) -> bool:
        """Record `outcome` as the job's result; False, and nothing recorded, if it cannot count."""
        if outcome.job_id != job_id:
            raise ValueError(f"outcome of {outcome.job_id!r} committed under {job_id!r}")
        if job_id in self._outcomes:
            self.num_duplicates += 1
            return False
        if (job_id, attempt) in self._revoked:
            self.num_revoked_results += 1
            return False
        self._outcomes[job_id] = outcome
        self.num_committed += 1
        return True

    def get(self, job_id: str) -> Outcome | None:
        return self._outcomes.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._outcomes

    def __len__(self) -> int:
        return len(self._outcomes)

    def __iter__(self) -> Iterator[Outcome]:
        return iter(self._outcomes.values())
