"""`Grader`: the one grading entry point — (task, response) pairs in, one `Score` per pair out.

It looks up each task's verifier config by domain id (a callable the caller gives, e.g.
`DomainRegistry.verifier_config`), and hands the items to an executor: the worker pool when
`ExecutorConfig.num_workers > 0`, else inline in the calling thread. An item whose verifier config
`needs_main_thread` is never scored inline off the main thread: it goes to a one-worker pool that the
grader starts on first need and stops in `close()`. An item whose config `runs_in_sandbox` is always
scored inline, all such items of a call in one `score_many` batch per verifier (its programs run
concurrently in the verifier's sandbox pool, not one per worker process). Verifiers are built once per
config and cached by whichever executor scores them.

Agent domains (verifier kind `environment`) are graded by running their environment on the response as
the episode's assistant messages: `grade` passes `[response]`, `grade_turns` a list of messages, to the
`episodes` scorer the caller gives (`DomainRegistry.score_episode`), inline in the calling thread.

Guarantees: order is kept; content never makes `grade` raise (a verifier bug or a dead worker is an
infra failure). Not here: retries of infra failures (the reward stage), the control run's coin flips.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from posttrain.types import Score, Task
from posttrain.verify.configs import EnvironmentConfig, VerifierConfig
from posttrain.verify.executor import ExecutorConfig, InlineExecutor, VerifyItem, WorkerPool, score_grouped

VerifierLookup = Callable[[str], VerifierConfig]
"""Domain id -> the verifier config that grades it."""
EpisodeScorer = Callable[[Task, Sequence[str]], Score]
"""(task, assistant messages in order) -> the grade of the episode they make."""


class GradingBackend(Protocol):
    """What the reward stage and evaluation grade through: a `Grader`, or a pool of remote ones
    (`posttrain.dist.grader_pool.RayGraderPool`)."""

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]: ...

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]: ...

    def close(self) -> None: ...


class Grader:
    """Grades (task, response) pairs with their domains' verifiers; close() stops any workers."""

    def __init__(self, lookup: VerifierLookup, config: ExecutorConfig | None = None,
                 episodes: EpisodeScorer | None = None) -> None:  # fmt: skip
        self.lookup = lookup
        self.episodes = episodes
        self.config = config or ExecutorConfig()
        self._inline = InlineExecutor()
        self._pool = WorkerPool(self.config) if self.config.num_workers > 0 else None
        self._main_thread_pool: WorkerPool | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def num_restarts(self) -> int:
        """Worker processes replaced after a crash or a missed deadline."""
        pools = (self._pool, self._main_thread_pool)
        return sum(pool.num_restarts for pool in pools if pool is not None)

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per pair, in order."""
        items: list[VerifyItem] = [(task, response, self.lookup(task.domain_id)) for task, response in pairs]
        episodic = [isinstance(cfg, EnvironmentConfig) and self.episodes is not None for _, _, cfg in items]
        if not any(episodic):
            return self._grade_items(items)
        rest = iter(self._grade_items([it for it, e in zip(items, episodic, strict=True) if not e]))
        return [self._episode(it[0], [it[1]]) if e else next(rest) for it, e in zip(items, episodic, strict=True)]

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        """One Score per (task, assistant messages): an episode for agent domains; for any other domain
        the messages joined by newlines are graded as one response."""
        episodic = [isinstance(self.lookup(t.domain_id), EnvironmentConfig) and self.episodes is not None
                    for t, _ in items]  # fmt: skip
        joined = iter(self.grade([(t, "\n".join(turns)) for (t, turns), e in zip(items, episodic, strict=True)
                                  if not e]))  # fmt: skip
        return [self._episode(t, turns) if e else next(joined) for (t, turns), e in zip(items, episodic, strict=True)]

    def _episode(self, task: Task, turns: Sequence[str]) -> Score:
        assert self.episodes is not None
        try:
            return self.episodes(task, list(turns))
        except Exception as exc:  # the scorer promises a Score; a bug in it is ours, not the policy's
            return Score.infra(f"episode scorer failed: {type(exc).__name__}: {exc}")

    def _grade_items(self, items: list[VerifyItem]) -> list[Score]:
        off_main = threading.current_thread() is not threading.main_thread()
        routes = [self._route(cfg, off_main) for _, _, cfg in items]
        return score_grouped(routes, lambda route, where: route.score_batch([items[p] for p in where]))

    def _route(self, config: VerifierConfig, off_main: bool) -> InlineExecutor | WorkerPool:
        """Sandboxed verifiers inline (they batch through their own pool), else the worker pool when
        there is one, a main-thread worker for main-thread verifiers off the main thread, else inline."""
        if config.runs_in_sandbox:
            return self._inline
        if self._pool is not None:
            return self._pool
        return self._main_thread_workers() if off_main and config.needs_main_thread else self._inline

    def _main_thread_workers(self) -> WorkerPool:
        with self._lock:
            if self._main_thread_pool is None:
                self._main_thread_pool = WorkerPool(self.config.model_copy(update={"num_workers": 1}))
            return self._main_thread_pool

    def close(self) -> None:
        """Stop worker processes (idempotent); a later `grade` starts new ones."""
        for pool in (self._pool, self._main_thread_pool):
            if pool is not None:
                pool.close()
