"""Helpers shared by the verifier tests."""

from __future__ import annotations

from typing import Any

from posttrain.types import Task


def make_task(gold: Any, answer: str | None = None, index: int = 0, domain_id: str = "test/verify/t") -> Task:
    """A minimal task carrying `gold` (the reference) and `answer` (a gold response)."""
    return Task(id=f"{domain_id}#{index}", domain_id=domain_id, prompt="q", gold=gold, answer=answer)
