"""What runs inside a Ray worker: a rollout engine or a grader, built in the worker from a factory.

Plain classes (Ray wraps them in `posttrain.dist.workers`, so this module imports no Ray and no torch).
Each builds its object once, in the worker's process, from a picklable zero-argument factory the caller
gives (e.g. `functools.partial(rollout_engine, config)`): the model, the verifiers and their sandboxes
therefore live on the worker's host. `EngineWorker` remembers the weight version it holds and returns it
with every batch of outputs, so the caller knows which policy produced them.
Not here: choosing a worker, replacing dead ones, retries (`posttrain.dist.workers`, `dispatch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from posttrain.rollout.api import GenerationRequest, RequestOutput, RolloutEngine
from posttrain.types import Score, Task
from posttrain.verify import Grader


class EngineWorker:
    """A rollout engine of its own; `generate` answers with (weight version held, outputs)."""

    def __init__(self, factory: Callable[[], RolloutEngine]) -> None:
        self.engine = factory()
        self.version: int | None = None

    def generate(self, requests: Sequence[GenerationRequest]) -> tuple[int | None, list[RequestOutput]]:
        return self.version, self.engine.generate(requests)

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> int:
        self.engine.update_weights(state_dict, version)
        self.version = version
        return version

    def stats(self) -> dict[str, float]:
        return self.engine.stats()

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()


class GraderWorker:
    """A `Grader` of its own (its verifier processes and sandboxes run on this worker's host)."""

    def __init__(self, factory: Callable[[], Grader]) -> None:
        self.grader = factory()

    def grade(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        return self.grader.grade(pairs)

    def grade_turns(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[Score]:
        return self.grader.grade_turns(items)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.grader.close()
