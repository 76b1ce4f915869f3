"""Helpers shared by the verifier tests."""

from __future__ import annotations

from typing import Any

from posttrain.types import Task


def make_task(gold: Any, answer: str | None = None, index: int = 0) -> Task:
    """A minimal task carrying `gold` (the reference) and `answer` (a gold response)."""
    return Task(id=f"test/verify/t#{index}", domain_id="test/verify/t", prompt="q", gold=gold, answer=answer)
