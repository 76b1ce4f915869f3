"""Plugin verifier factories used by the tests (loaded through `package.module:attr`)."""

from __future__ import annotations

import os
import time

from posttrain.types import Score, Task


class _Fixed:
    def __init__(self, reward: float) -> None:
        self.reward = reward

    def score(self, task: Task, response: str) -> Score:
        if response == "crash":
            os._exit(3)  # a worker dying mid-item
        if response == "hang":
            time.sleep(3600)
        if response == "raise":
            raise RuntimeError("verifier bug")
        return Score.correct(self.reward) if response == "ok" else Score.wrong()


def fixed(reward: float = 1.0) -> _Fixed:
    """A verifier passing `ok` with `reward`, dying on `crash`, hanging on `hang`, raising on `raise`."""
    return _Fixed(reward)


def not_a_verifier() -> object:
    return object()
