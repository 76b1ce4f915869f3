"""reasoning-gym's own scorers as a verifier, plus the shared, cached dataset constructor.

Gold convention: `task.gold` is the reasoning-gym entry made JSON-safe - a dict with `question`,
`answer` and `metadata` - and `task.answer` is a gold response (`<answer>...</answer>` around the
entry's answer). The scorer is `dataset.score_answer(answer, entry)` of a dataset rebuilt from
`ReasoningGymConfig.params` (cached per process, so the family that generated the task and the verifier
share one instance in-process).

Attribution: an empty extraction is a model failure without calling the scorer. Several scorers raise
on malformed answers (e.g. `int("garbage")`); an exception on anything but the entry's own answer is
therefore graded a model failure (details carry `scorer_error`), while an exception on the gold answer
itself, a dataset that cannot be built or an entry that is not a dict is an infra failure.
Rewards: see `ReasoningGymConfig.partial_credit`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.configs import ReasoningGymConfig
from posttrain.verify.extract import extract_answer

_EPS = 1e-9


@functools.lru_cache(maxsize=2048)
def _dataset_from_json(name: str, params_json: str) -> Any:
    import reasoning_gym

    return reasoning_gym.create_dataset(name, **json.loads(params_json))


def load_dataset(name: str, params: Mapping[str, Any]) -> Any:
    """`reasoning_gym.create_dataset(name, **params)`, cached per (name, params) for the process."""
    return _dataset_from_json(name, json.dumps(dict(params), sort_keys=True))


@dataclass(frozen=True)
class ReasoningGymVerifier:
    """Grades with the reasoning-gym dataset's `score_answer`."""

    config: ReasoningGymConfig

    def score(self, task: Task, response: str) -> Score:
        return guarded(self._grade, task, response)

    def _grade(self, task: Task, response: str) -> Score:
        entry = task.gold
        if not isinstance(entry, dict) or "question" not in entry:
            raise GoldError("gold must be a reasoning-gym entry (a dict with question/answer/metadata)")
        dataset = load_dataset(self.config.dataset, self.config.params)
        answer = extract_answer(response, self.config.extract)
        if answer is None:
            return Score.wrong(message=f"no answer found (extract={self.config.extract})")
        try:
            raw = float(dataset.score_answer(answer, entry))
        except Exception as exc:
            if answer == entry.get("answer"):
                raise
            return Score.wrong(message="the scorer rejected the answer", scorer_error=type(exc).__name__)
        return self._to_score(raw if math.isfinite(raw) else 0.0)

    def _to_score(self, raw: float) -> Score:
        passed = raw >= self.config.pass_threshold - _EPS
        reward = min(max(raw, 0.0), 1.0) if self.config.partial_credit else float(passed)
        if passed:
            return Score.correct(reward=reward, raw_score=raw)
        return Score.wrong(
            reward=reward, message="the scorer gave less than the pass threshold", raw_score=raw
        )
