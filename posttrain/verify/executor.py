"""Verify executors: where verifiers run. `InlineExecutor` scores in the calling thread; `WorkerPool`
scores many (task, response, verifier config) items in a pool of worker processes.

Why processes: verifiers may hang or crash (sympy, reasoning-gym scorers, plugins), and math-verify
needs a main thread for its `signal.alarm` budget; each worker scores in its own main thread.
Which executor an item goes to is the `Grader`'s decision (`posttrain.verify.grader`), from the
executor config and what the verifier config declares it needs.

Guarantees:
- `score_batch(items)` returns one `Score` per item, in order, and never raises for item content.
- Items travel in chunks (`chunk_size`) to keep per-item overhead low; each worker builds a verifier once
  per distinct config and keeps it, and answers item by item, so the pool always knows which item a
  worker is on.
- A worker that dies, or spends longer than `item_timeout_s` on one item, is killed and replaced; the
  item it was on gets `Score.infra(...)` (never a model failure) and the rest of its chunk is re-queued.
- `InlineExecutor` uses the same verifier cache with no isolation; there a hang is not bounded.
Not here: retries of infra failures (the reward stage decides), async APIs, sandboxes (a verifier whose
config `runs_in_sandbox` brings its own pool and is scored inline, see `posttrain.verify.grader`).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.types import Score, Task
from posttrain.verify.base import BatchVerifier, Verifier, score_many_safely, score_safely
from posttrain.verify.build import build_verifier
from posttrain.verify.configs import VerifierConfig

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

VerifyItem = tuple[Task, str, VerifierConfig]
"""One thing to grade: the task, the response text and the verifier config."""


class ExecutorConfig(StrictModel):
    """How verification is spread over worker processes."""

    num_workers: int = Field(2, ge=0)
    """Worker processes; 0 scores inline in the calling thread (no isolation, hangs not bounded)."""
    item_timeout_s: float = Field(60.0, gt=0)
    """Longest a worker may spend on one item before it is presumed hung and replaced."""
    startup_timeout_s: float = Field(60.0, gt=0)
    """Extra allowance for a fresh worker's first item (interpreter start and imports)."""
    chunk_size: int = Field(64, ge=1)
    """Most items sent to a worker in one round trip."""


def config_key(config: VerifierConfig) -> str:
    """A stable cache key for a verifier config."""
    return f"{config.kind}:{config.model_dump_json()}"


class VerifierCache:
    """Verifiers built on first use and kept by config key; a build failure is remembered as infra."""

    def __init__(self) -> None:
        self._built: dict[str, Verifier | str] = {}

    def score(self, task: Task, response: str, config: VerifierConfig, key: str | None = None) -> Score:
        verifier = self._verifier(config, key or config_key(config))
        if isinstance(verifier, str):
            return Score.infra(verifier)
        return score_safely(verifier, task, response)

    def score_many(self, pairs: Sequence[tuple[Task, str]], config: VerifierConfig, key: str) -> list[Score]:
        """Pairs graded by one verifier: in one `score_many` call when it has one, else one by one."""
        verifier = self._verifier(config, key)
        if isinstance(verifier, str):
            return [Score.infra(verifier) for _ in pairs]
        if isinstance(verifier, BatchVerifier):
            return score_many_safely(verifier, pairs)
        return [score_safely(verifier, task, response) for task, response in pairs]

    def _verifier(self, config: VerifierConfig, key: str) -> Verifier | str:
        if key not in self._built:
            try:
                self._built[key] = build_verifier(config)
            except Exception as exc:
                self._built[key] = f"cannot build {config.kind} verifier: {exc}"[:500]
        return self._built[key]


def worker_main(fd: int) -> None:
    """Worker loop on connection `fd`: receive (configs, items) chunks, answer `(position, Score)`."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    cache = VerifierCache()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        configs, items = message
        for position, task, response, key in items:
            score = cache.score(task, response, configs[key], key)
            try:
                conn.send((position, score))
            except (EOFError, OSError):
                return
            except Exception as exc:  # details that do not pickle
                conn.send((position, Score.infra(f"score could not be sent: {type(exc).__name__}")))


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    inflight: deque[int] = field(default_factory=deque)
    progress_at: float = 0.0
    answered: bool = False

    def deadline(self, config: ExecutorConfig) -> float:
        allowance = 0.0 if self.answered else config.startup_timeout_s
        return self.progress_at + config.item_timeout_s + allowance


def _stop(worker: _Worker, graceful: bool) -> None:
    if graceful and worker.process.poll() is None:
        try:
            worker.conn.send(None)
            worker.process.wait(timeout=2.0)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    if worker.process.poll() is None:
        worker.process.kill()
        worker.process.wait(timeout=5.0)
    worker.conn.close()


def _spawn_worker() -> _Worker:
    """A fresh interpreter running `worker_main` on one end of a socket pair.

    A plain subprocess rather than multiprocessing's spawn: the child must not re-import the parent's
    `__main__` (scripts without a main guard would run again in every worker)."""
    parent, child = mp.Pipe(duplex=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    code = f"from posttrain.verify.executor import worker_main; worker_main({child.fileno()})"
    process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[child.fileno()], env=env)
    child.close()
    return _Worker(process, parent)


def _stop_all(workers: list[_Worker]) -> None:
    for worker in workers:
        _stop(worker, graceful=True)
    workers.clear()


@dataclass
class _Batch:
    """Bookkeeping of one `score_batch` call."""

    items: Sequence[VerifyItem]
    keys: list[str]
    configs: dict[str, VerifierConfig]
    results: list[Score | None]
    queue: deque[list[int]]
    missing: int

    def settle(self, position: int, score: Score) -> None:
        if self.results[position] is None:
            self.missing -= 1
        self.results[position] = score


_K = TypeVar("_K", bound=Hashable)


def score_grouped(keys: Sequence[_K], score: Callable[[_K, list[int]], list[Score]]) -> list[Score]:
    """One Score per position: the positions sharing a key are scored together by `score(key, positions)`
    (one call per distinct key, in first-seen order) and the results put back in place."""
    results: list[Score] = [Score.infra("unscored")] * len(keys)
    positions: dict[_K, list[int]] = {}
    for position, key in enumerate(keys):
        positions.setdefault(key, []).append(position)
    for key, where in positions.items():
        for position, result in zip(where, score(key, where), strict=True):
            results[position] = result
    return results


class InlineExecutor:
    """Scores in the calling thread, verifiers cached by config; the items of a verifier with
    `score_many` go to it in one call (a sandboxed verifier runs them concurrently)."""

    def __init__(self) -> None:
        self._cache = VerifierCache()

    def score_batch(self, items: Sequence[VerifyItem]) -> list[Score]:
        """One Score per item, in order."""
        def by_verifier(key: str, positions: list[int]) -> list[Score]:
            pairs = [(items[p][0], items[p][1]) for p in positions]
            return self._cache.score_many(pairs, items[positions[0]][2], key)

        return score_grouped([config_key(cfg) for _, _, cfg in items], by_verifier)

    def close(self) -> None:
        """Nothing to release."""


class WorkerPool:
    """A pool of verifier worker processes; use as a context manager or call `close()`."""

    def __init__(self, config: ExecutorConfig | None = None) -> None:
        self.config = config or ExecutorConfig()
        if self.config.num_workers < 1:
            raise ValueError("a WorkerPool needs num_workers >= 1 (0 means inline scoring)")
        self.num_restarts = 0
        """Workers replaced after a crash or a missed deadline."""
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _stop_all, self._workers)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (idempotent); a later `score_batch` starts new ones."""
        with self._lock:
            _stop_all(self._workers)

    def score_batch(self, items: Sequence[VerifyItem]) -> list[Score]:
        """One Score per item, in order."""
        if not items:
            return []
        with self._lock:
            batch = self._new_batch(items)
            try:
                self._run(batch)
            except Exception as exc:  # pool machinery failed: nothing here is the model's fault
                _stop_all(self._workers)
                for position, result in enumerate(batch.results):
                    if result is None:
                        batch.settle(position, Score.infra(f"verifier pool failed: {exc!r}"[:500]))
            return [result if result is not None else Score.infra("unscored") for result in batch.results]

    def _new_batch(self, items: Sequence[VerifyItem]) -> _Batch:
        keys = [config_key(cfg) for _, _, cfg in items]
        configs = {key: cfg for key, (_, _, cfg) in zip(keys, items, strict=True)}
        per_chunk = min(self.config.chunk_size, math.ceil(len(items) / (2 * self.config.num_workers)))
        positions = list(range(len(items)))
        chunks = deque(positions[i : i + per_chunk] for i in range(0, len(items), per_chunk))
        return _Batch(items, keys, configs, [None] * len(items), chunks, len(items))

    def _run(self, batch: _Batch) -> None:
        while len(self._workers) < self.config.num_workers:
            self._workers.append(_spawn_worker())
        while batch.missing:
            for worker in self._workers:
                if not worker.inflight and batch.queue:
                    self._dispatch(worker, batch.queue.popleft(), batch)
            busy = [worker for worker in self._workers if worker.inflight]
            if not busy:
                if batch.queue:
                    continue
                return
            timeout_s = min(worker.deadline(self.config) for worker in busy) - time.monotonic()
            ready = wait([worker.conn for worker in busy], timeout=max(0.0, timeout_s))
            for worker in busy:
                if worker.conn in ready or worker.conn.poll(0):
                    self._drain(worker, batch)
                elif time.monotonic() > worker.deadline(self.config):
                    self._replace(worker, batch, f"verifier worker exceeded {self.config.item_timeout_s}s")

    def _dispatch(self, worker: _Worker, chunk: list[int], batch: _Batch) -> None:
        keys = {batch.keys[position] for position in chunk}
        payload = [(p, batch.items[p][0], batch.items[p][1], batch.keys[p]) for p in chunk]
        message = ({key: batch.configs[key] for key in keys}, payload)
        try:
            worker.conn.send(message)
        except OSError:  # died while idle: nothing of this chunk ran yet
            batch.queue.appendleft(chunk)
            self._swap(worker)
            return
        except Exception as exc:  # an item that cannot be pickled
            for position in chunk:
                batch.settle(position, Score.infra(f"item could not be sent to a worker: {exc!r}"[:500]))
            return
        worker.inflight.extend(chunk)
        worker.progress_at = time.monotonic()

    def _drain(self, worker: _Worker, batch: _Batch) -> None:
        try:
            while worker.inflight and worker.conn.poll(0):
                position, score = worker.conn.recv()
                if worker.inflight and worker.inflight[0] == position:
                    worker.inflight.popleft()
                batch.settle(position, score)
                worker.progress_at = time.monotonic()
                worker.answered = True
        except (EOFError, OSError):
            code = worker.process.poll()
            self._replace(worker, batch, f"verifier worker died (exit code {code})")

    def _replace(self, worker: _Worker, batch: _Batch, reason: str) -> None:
        """The item the worker was on is an infra failure; the rest of its chunk goes back in the queue."""
        if worker.inflight:
            culprit = worker.inflight.popleft()
            batch.settle(culprit, Score.infra(reason, task_id=batch.items[culprit][0].id))
        if worker.inflight:
            batch.queue.appendleft(list(worker.inflight))
        self._swap(worker)

    def _swap(self, worker: _Worker) -> None:
        _stop(worker, graceful=False)
        self._workers[self._workers.index(worker)] = _spawn_worker()
        self.num_restarts += 1
