"""The evaluation result cache: one graded response per key, in an SQLite file (stdlib `sqlite3`).

A key (`record_key`) is the sha256 of everything that decides a graded response: the checkpoint's
weights hash, the prompt rendering (system prompt), the task id and content hash, the grading (the
domain's verifier config), the sampling (`SampleSlot.sampling`: greedy, or temperature, top-p, top-k
and seed; the token budgets) and the response's index among the task's samples. The sample count is not
part of it, so asking for more samples reuses the first ones. A record holds the response text, its
token count and the `Score` fields. Infra failures are never stored (the next run grades them again).

Guarantees: a stored record is returned unchanged for its key (details round-trip through JSON); a
write is one transaction, so an interrupted run leaves whole records. Not guaranteed: that a verifier's
*code* is the one that graded a record (only its config is in the key) or that an environment family's
parameters are (its tasks' content is): after changing either, use a new cache directory. Not here:
deciding what to generate (`posttrain.eval.collect`).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.types import ErrorKind, Score, Task

CACHE_FILE = "results.sqlite"
"""The file's name inside a cache directory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    weights_hash TEXT NOT NULL,
    task_id TEXT NOT NULL,
    sampling TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    response TEXT NOT NULL,
    num_tokens INTEGER NOT NULL,
    reward REAL NOT NULL,
    passed INTEGER NOT NULL,
    error TEXT NOT NULL,
    message TEXT NOT NULL,
    details TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class SampleRecord:
    """One graded response."""

    response: str
    """The text graded (an episode's last assistant message)."""
    score: Score
    """Its grade."""
    num_tokens: int = 0
    """Tokens the policy generated for it (all turns of an episode)."""


@dataclass(frozen=True)
class SampleSlot:
    """Which response of which task: the cache key's parts other than the checkpoint's."""

    task: Task
    sampling: Mapping[str, Any]
    """Greedy or sampled, with every parameter that changes the response (JSON-ready)."""
    index: int = 0
    """The response's index among the task's samples (0 for greedy)."""
    grading: str = ""
    """The domain's verifier config as JSON."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else that changes the response (the system prompt)."""


def record_key(weights_hash: str, slot: SampleSlot) -> str:
    """The cache key of one response of `slot` by the checkpoint with `weights_hash`."""
    parts = [weights_hash, slot.task.id, slot.task.content_hash, slot.grading, dict(slot.sampling), slot.index,
             dict(slot.extra)]  # fmt: skip
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


class ResultCache:
    """Graded responses by key in one SQLite file; `ResultCache(None)` keeps them in memory only."""

    def __init__(self, directory: str | Path | None) -> None:
        self.path = None if directory is None else Path(directory) / CACHE_FILE
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path))
        self._db.execute(_SCHEMA)
        self._db.commit()

    def __enter__(self) -> ResultCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def get_many(self, keys: Sequence[str]) -> dict[str, SampleRecord]:
        """The stored records among `keys` (missing keys are absent from the result)."""
        found: dict[str, SampleRecord] = {}
        for start in range(0, len(keys), 500):  # SQLite bounds the number of parameters per statement
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT key, response, num_tokens, reward, passed, error, message, details FROM records "
                f"WHERE key IN ({marks})", chunk,
            )  # fmt: skip
            for key, response, num_tokens, reward, passed, error, message, details in rows:
                score = Score(reward=reward, passed=bool(passed), error=ErrorKind(error), message=message,
                              details=json.loads(details))  # fmt: skip
                found[key] = SampleRecord(response, score, int(num_tokens))
        return found

    def put_many(self, items: Iterable[tuple[str, str, SampleSlot, SampleRecord]]) -> int:
        """Store (key, weights hash, slot, record) items in one transaction, infra failures skipped;
        returns how many were stored."""
        rows = [
            (key, weights_hash, slot.task.id, json.dumps(dict(slot.sampling), sort_keys=True), slot.index,
             record.response, record.num_tokens, record.score.reward, int(record.score.passed),
             record.score.error.value, record.score.message,
             json.dumps(record.score.details, sort_keys=True, default=str))
            for key, weights_hash, slot, record in items
            if not record.score.is_infra_failure
        ]  # fmt: skip
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO records VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        return len(rows)

    def close(self) -> None:
        self._db.close()
