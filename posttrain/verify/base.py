"""The verifier contract.

`score(task, response) -> Score` is deterministic and never raises for any response text (empty,
garbage, invalid code points, megabytes long): a bad response is a model failure, a broken verifier or
worker is an infra failure. Verifiers that need a sandbox or a main thread (math-verify) are run through
`posttrain.verify.runner`, which executes them in worker processes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from posttrain.types import Score, Task


@runtime_checkable
class Verifier(Protocol):
    """Grades one response to one task."""

    def score(self, task: Task, response: str) -> Score:
        """Deterministic grade; never raises."""
        ...
