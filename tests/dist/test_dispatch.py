"""`run_calls` over a scripted worker set (no Ray): retries of lost workers, deadlines, order, bugs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from posttrain.dist.dispatch import run_calls
from posttrain.dist.workers import Call, WorkerLost

Script = Callable[[str, int], Any]
"""(call's argument, attempt number from 1) -> a value, an exception to fail with, or HANG."""
HANG = object()


class ScriptedWorkers:
    """Settles each call at once as `script` says (or never, for HANG); records what happened."""

    def __init__(self, script: Script, num_workers: int = 2) -> None:
        self.script = script
        self.num_workers = num_workers
        self.attempts: dict[str, int] = {}
        self.pending: set[Future[Any]] = set()
        self.max_pending = 0
        self.abandoned: list[Future[Any]] = []

    def submit(self, call: Call) -> Future[Any]:
        (arg,) = call.args
        self.attempts[arg] = self.attempts.get(arg, 0) + 1
        outcome = self.script(arg, self.attempts[arg])
        future: Future[Any] = Future()
        if outcome is HANG:
            self.pending.add(future)
            self.max_pending = max(self.max_pending, len(self.pending))
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
        return future

    def abandon(self, future: Future[Any]) -> None:
        self.pending.discard(future)
        self.abandoned.append(future)


def calls(*args: str) -> list[Call]:
    return [Call("run", (a,)) for a in args]


def test_results_come_back_in_call_order() -> None:
    workers = ScriptedWorkers(lambda arg, _: arg.upper())
    settled = run_calls(calls("a", "b", "c"), workers, max_attempts=3)
    assert [(s.value, s.status, s.attempts) for s in settled] == [("A", "ok", 1), ("B", "ok", 1), ("C", "ok", 1)]


def test_a_call_whose_worker_died_runs_again_until_it_succeeds() -> None:
    def script(arg: str, attempt: int) -> Any:
        return WorkerLost("killed") if arg == "b" and attempt < 3 else arg

    workers = ScriptedWorkers(script)
    settled = run_calls(calls("a", "b", "c"), workers, max_attempts=3)
    assert [(s.value, s.status, s.attempts) for s in settled] == [("a", "ok", 1), ("b", "ok", 3), ("c", "ok", 1)]
    assert workers.attempts == {"a": 1, "b": 3, "c": 1}  # the others ran once: nothing duplicated


def test_a_call_that_keeps_losing_its_worker_settles_as_infra_failed() -> None:
    workers = ScriptedWorkers(lambda arg, _: WorkerLost("node gone") if arg == "b" else arg)
    settled = run_calls(calls("a", "b"), workers, max_attempts=2)
    assert (settled[1].status, settled[1].attempts, settled[1].value) == ("infra_failed", 2, None)
    assert "node gone" in settled[1].error and settled[0].status == "ok"


def test_a_call_past_its_deadline_is_abandoned_once_and_not_retried() -> None:
    clock = itertools.count(0.0, 10.0).__next__  # every reading is 10 s later
    workers = ScriptedWorkers(lambda arg, _: HANG if arg == "stuck" else arg)
    settled = run_calls(calls("a", "stuck", "c"), workers, max_attempts=3, timeout_s=15.0, clock=clock)
    assert [s.status for s in settled] == ["ok", "expired", "ok"]
    assert workers.attempts["stuck"] == 1 and len(workers.abandoned) == 1


def test_no_more_calls_in_flight_than_workers() -> None:
    clock = itertools.count(0.0, 10.0).__next__
    workers = ScriptedWorkers(lambda _arg, _attempt: HANG, num_workers=2)
    settled = run_calls(calls("a", "b", "c"), workers, max_attempts=1, timeout_s=5.0, clock=clock)
    assert [s.status for s in settled] == ["expired"] * 3
    assert workers.max_pending == 2


def test_an_exception_raised_by_the_call_itself_propagates() -> None:
    workers = ScriptedWorkers(lambda arg, _: ValueError("bug") if arg == "b" else arg)
    with pytest.raises(ValueError, match="bug"):
        run_calls(calls("a", "b"), workers, max_attempts=3)
