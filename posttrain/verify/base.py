"""The verifier contract.

`score(task, response) -> Score` is deterministic and never raises for any response text (empty,
garbage, invalid code points, megabytes long): a bad response is a model failure, a broken verifier or
worker is an infra failure. A verifier that grades a batch faster than item by item (programs run
concurrently in a sandbox pool) also implements `score_many(items) -> list[Score]` (`BatchVerifier`). Callers grade through `posttrain.verify.grader.Grader`, which sends a
verifier that needs a main thread (math-verify) to a worker process when it cannot score inline.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

from posttrain.types import Score, Task

V = TypeVar("V")


@runtime_checkable
class Verifier(Protocol):
    """Grades one response to one task."""

    def score(self, task: Task, response: str) -> Score:
        """Deterministic grade; never raises."""
        ...


@runtime_checkable
class BatchVerifier(Verifier, Protocol):
    """A verifier that grades many responses at once; same contract as `score`, one Score per item."""

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per (task, response), in order; never raises."""
        ...


def score_many_safely(verifier: BatchVerifier, items: Sequence[tuple[Task, object]]) -> list[Score]:
    """`verifier.score_many` with `score_safely`'s guarantees, item by item: any exception, or an answer
    that is not one Score per item, makes every item an infra failure."""
    texts = [(task, r if isinstance(r, str) else ("" if r is None else str(r))) for task, r in items]
    name = type(verifier).__name__
    try:
        scores = verifier.score_many(texts)
    except Exception as exc:  # the contract says never raise; a raise is a bug in the verifier
        return [Score.infra(f"{name} raised {type(exc).__name__}: {exc}"[:500]) for _ in items]
    if not isinstance(scores, list) or len(scores) != len(items) or not all(isinstance(s, Score) for s in scores):
        return [Score.infra(f"{name}.score_many did not return one Score per item") for _ in items]
    return scores


def score_safely(verifier: Verifier, task: Task, response: object) -> Score:
    """`verifier.score`, with a non-str response treated as text and any exception (a verifier bug,
    never the model's fault) turned into an infra failure."""
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    try:
        score = verifier.score(task, text)
    except Exception as exc:  # the contract says never raise; a raise is a bug in the verifier
        return Score.infra(f"{type(verifier).__name__} raised {type(exc).__name__}: {exc}"[:500])
    if not isinstance(score, Score):
        return Score.infra(f"{type(verifier).__name__} returned {type(score).__name__}, not a Score")
    return score


class GoldError(ValueError):
    """A task's gold data is missing or unusable: the task's fault, so graded as an infra failure."""


def gold_json(task: Task) -> object:
    """`Task.gold`, decoded when it is JSON text; GoldError (an infra score) when that text is not JSON."""
    gold = task.gold
    if isinstance(gold, str):
        try:
            return json.loads(gold)
        except ValueError as exc:
            raise GoldError(f"gold is not JSON: {exc}") from None
    return gold


def guarded(grade: Callable[[V, Task, str], Score]) -> Callable[[V, Task, str], Score]:
    """Decorate a verifier's `score` so that it never raises: bad gold data or a bug is infra."""

    @functools.wraps(grade)
    def score(self: V, task: Task, response: str) -> Score:
        try:
            return grade(self, task, response)
        except GoldError as exc:
            return Score.infra(f"task {task.id}: {exc}")
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # some libraries' timeouts derive from BaseException
            return Score.infra(f"verifier bug on task {task.id}: {type(exc).__name__}: {exc}"[:500])

    return score
