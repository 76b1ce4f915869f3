"""reasoning-gym's own scorers as a verifier, plus the shared, cached dataset constructor.

Gold convention: `task.gold` is the reasoning-gym entry made JSON-safe by `encode_entry` - a dict with
`question`, `answer` and `metadata`, where tuples and the like are tagged so that `decode_entry` restores
the values the scorer compares against - and `task.answer` is a gold response (`<answer>...</answer>` around the
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

import dataclasses
import datetime
import enum
import functools
import json
import math
import types
import typing
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
    from reasoning_gym.factory import DATASETS

    params = json.loads(params_json)
    if name in DATASETS:
        params = _restore_types(DATASETS[name][1], params)
    return reasoning_gym.create_dataset(name, **params)


def _restore_types(config_cls: type, params: dict[str, Any]) -> dict[str, Any]:
    """Undo what JSON did to a dataset config's kwargs: lists back to tuples, strings back to enums."""
    try:
        hints = typing.get_type_hints(config_cls)
    except Exception:  # unresolvable annotations: pass the values through
        return params
    return {key: _restore(value, hints.get(key)) for key, value in params.items()}


def _restore(value: Any, hint: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return hint(**_restore_types(hint, value))
    if isinstance(hint, type) and issubclass(hint, enum.Enum) and not isinstance(value, hint):
        return hint(value)
    if hint in (datetime.date, datetime.datetime) and isinstance(value, str):
        return hint.fromisoformat(value)
    if origin in (typing.Union, types.UnionType):
        candidates = [arg for arg in args if arg is not type(None)]
        return _restore(value, candidates[0]) if len(candidates) == 1 else value
    if isinstance(value, list) and (hint is tuple or origin is tuple):
        item_hint = args[0] if args else None
        return tuple(_restore(item, item_hint) for item in value)
    if isinstance(value, list) and origin is list and args:
        return [_restore(item, args[0]) for item in value]
    return value


def clear_dataset_cache() -> None:
    """Forget every cached dataset."""
    _dataset_from_json.cache_clear()


def load_dataset(name: str, params: Mapping[str, Any]) -> Any:
    """`reasoning_gym.create_dataset(name, **params)`, cached per (name, params) for the process."""
    return _dataset_from_json(name, json.dumps(dict(params), sort_keys=True))


def encode_entry(value: Any) -> Any:
    """A JSON-safe form of a reasoning-gym entry that `decode_entry` turns back into equal values.

    Tuples, sets, dicts with non-string keys, numpy arrays and non-finite floats are tagged
    (`{"__tuple__": [...]}` ...) because several scorers compare metadata by equality with the
    generator's own types; enums, dataclasses and other objects are kept as their value, fields or str.
    """
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: encode_entry(item) for key, item in value.items()}
        return {"__items__": [[encode_entry(k), encode_entry(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [encode_entry(item) for item in value]
    if isinstance(value, tuple):
        return {"__tuple__": [encode_entry(item) for item in value]}
    if isinstance(value, set | frozenset):
        return {"__set__": sorted((encode_entry(item) for item in value), key=repr)}
    if isinstance(value, enum.Enum):
        return encode_entry(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    return _encode_object(value)


def _encode_object(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode_entry({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if type(value).__module__ == "numpy":
        if hasattr(value, "shape") and value.shape:
            return {"__ndarray__": encode_entry(value.tolist()), "dtype": str(value.dtype)}
        return encode_entry(value.item())
    return str(value)


_DECODERS: dict[str, Any] = {
    "__tuple__": lambda body, _: tuple(decode_entry(item) for item in body),
    "__set__": lambda body, _: {decode_entry(item) for item in body},
    "__items__": lambda body, _: {decode_entry(k): decode_entry(v) for k, v in body},
    "__float__": lambda body, _: float(body),
    "__ndarray__": lambda body, tagged: _ndarray(decode_entry(body), tagged.get("dtype")),
}


def decode_entry(value: Any) -> Any:
    """The inverse of `encode_entry`."""
    if isinstance(value, list):
        return [decode_entry(item) for item in value]
    if not isinstance(value, dict):
        return value
    for tag, decoder in _DECODERS.items():
        if tag in value and len(value) <= 2:
            return decoder(value[tag], value)
    return {key: decode_entry(item) for key, item in value.items()}


def _ndarray(body: Any, dtype: str | None) -> Any:
    import numpy as np

    return np.array(body, dtype=dtype)


@dataclass(frozen=True)
class ReasoningGymVerifier:
    """Grades with the reasoning-gym dataset's `score_answer`."""

    config: ReasoningGymConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        entry = task.gold
        if not isinstance(entry, dict) or "question" not in entry:
            raise GoldError("gold must be a reasoning-gym entry (a dict with question/answer/metadata)")
        dataset = load_dataset(self.config.dataset, self.config.params)
        answer = extract_answer(response, self.config.extract)
        if answer is None:
            return Score.wrong(message=f"no answer found (extract={self.config.extract})")
        try:
            raw = float(dataset.score_answer(answer, decode_entry(entry)))
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
