"""`RayGraderPool`: M reward workers behind the grading surface the stages use (`grade`, `grade_turns`).

Each worker holds its own `Grader`, built in the worker from the caller's picklable factory
(`posttrain.dist.actors.GraderWorker`), so verifier processes and sandboxes run on that worker's host.
A call's items are grouped by domain (one domain's items share a verifier and its sandbox pool) and
cut into chunks of at most `chunk_size`; the chunks run in parallel on the workers as work items of the
task scheduler (`posttrain.sched.run_jobs`: fair share between domains, retries, deadlines). A chunk
whose worker died, or that ran past `timeout_s` (its worker is then killed and replaced), runs again on
a fresh worker, up to `max_attempts` attempts; a chunk that never succeeded (or whose grader raised)
comes back as infra-failure scores, which the reward stage re-grades like any other infra failure.

Guarantees: one `Score` per item, in order; nothing raises for what a response contains; an item is
scored once per call (a lost attempt's scores are never used). Not here: retrying infra scores (the
reward stage), the control run's coin flips.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from posttrain.dist.actors import GraderWorker
from posttrain.dist.config import AutoscaleConfig
from posttrain.dist.scaling import PoolScaler
from posttrain.dist.workers import Call, RayWorkerSet, WorkerOptions
from posttrain.sched import RetryPolicy, SchedConfig, WorkItem, run_jobs
from posttrain.types import Score, Task
from posttrain.verify import Grader


class RayGraderPool:
    """Grades through `num_workers` Ray reward workers (see module docstring); close() stops them."""

    def __init__(self, factory: Callable[[], Grader], num_workers: int, options: WorkerOptions = WorkerOptions(),
                 chunk_size: int = 64, timeout_s: float | None = 600.0, max_attempts: int = 3,
                 autoscale: AutoscaleConfig | None = None) -> None:  # fmt: skip
        self.chunk_size = chunk_size
        self.timeout_s = timeout_s
        self.sched = SchedConfig(retry=RetryPolicy(max_attempts=max_attempts, backoff_s=0.0))
        self.scaler = PoolScaler(autoscale or AutoscaleConfig())
        self.workers = RayWorkerSet(GraderWorker, factory, num_workers, options, name="reward")

    def __enter__(self) -> RayGraderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per (task, response), in order."""
        return self._grade("grade", pairs)

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        """One Score per (task, assistant messages), in order (see `Grader.grade_turns`)."""
        return self._grade("grade_turns", [(task, list(turns)) for task, turns in items])

    def close(self) -> None:
        """Stop the workers, each closing its grader first (idempotent)."""
        self.workers.close(Call("close"))

    def _grade(self, method: str, items: Sequence[tuple[Task, Any]]) -> list[Score]:
        if not items:
            return []
        chunks = _domain_chunks([task.domain_id for task, _ in items], self.chunk_size)
        work = [WorkItem(f"chunk-{k}", "verify", items[chunk[0]][0].domain_id, Call(method, ([items[i] for i in chunk],)),
                         deadline_s=self.timeout_s) for k, chunk in enumerate(chunks)]  # fmt: skip
        size = self.scaler.size_for(len(items), self.workers.num_workers)
        if size != self.workers.num_workers:
            self.workers.resize(size)
        start_s = time.perf_counter()
        outcomes = run_jobs(work, self.workers, self.sched)
        self.scaler.observe(len(items), self.workers.num_workers, time.perf_counter() - start_s)
        self.workers.refill()
        scores: list[Score | None] = [None] * len(items)
        for chunk, outcome in zip(chunks, outcomes, strict=True):
            if outcome.status == "ok":
                chunk_scores = outcome.value
            else:
                failure = Score.infra(f"reward chunk {outcome.status} after {outcome.attempts} attempts: {outcome.error}")
                chunk_scores = [failure] * len(chunk)
            for index, score in zip(chunk, chunk_scores, strict=True):
                scores[index] = score
        return [s for s in scores if s is not None]


def _domain_chunks(domain_ids: Sequence[str], chunk_size: int) -> list[list[int]]:
    """Item indices grouped by domain (first-seen order), cut into chunks of at most `chunk_size`."""
    by_domain: dict[str, list[int]] = defaultdict(list)
    for index, domain_id in enumerate(domain_ids):
        by_domain[domain_id].append(index)
    return [indices[i : i + chunk_size] for indices in by_domain.values() for i in range(0, len(indices), chunk_size)]
