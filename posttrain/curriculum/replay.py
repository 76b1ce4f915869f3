"""Failed-trajectory replay: tasks whose samples failed are drawn again, at a set share of each batch.

`FailureReplay` keeps, per domain, a bounded queue of tasks whose group did not fully succeed, each
with the kind of failure its failed samples showed most (`failure_kind`: the environment's end reason,
`tool_error` when a tool call failed and was never recovered from, else `wrong`). `draw(n)` takes up to
`share * n` of them (oldest first, domains in turn, so one domain cannot fill the replay share); the run
fills the rest of the batch from the mixture. A task leaves the queue once a group of it fully succeeds
or after `max_replays` draws; when a domain's queue is full the oldest entry goes. Counters report the
queue size, how many replayed groups were drawn, and their success and recovery rates, so a run can show
what replay does. Deterministic: no randomness, order is insertion order.
Not here: sampling weights between domains (`mixture.py`), what counts as success (the verifiers).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.types import Score, Task


class ReplayConfig(StrictModel):
    """Targeted re-sampling of failed tasks."""

    share: float = Field(0.0, ge=0.0, le=1.0)
    """Largest share of each batch's tasks drawn from the failure queue (0: off)."""
    capacity_per_domain: int = Field(64, ge=1)
    """Failed tasks kept per domain (oldest dropped first)."""
    max_replays: int = Field(2, ge=1)
    """Draws of one failed task before it leaves the queue without succeeding."""
    kinds: list[str] = Field(default_factory=list)
    """Failure kinds to queue (empty: all), e.g. `tool_error`, `max_turns`, `wrong`."""


def failure_kind(scores: Sequence[Score]) -> str:
    """The most common failure among a group's failed samples (see module docstring)."""
    kinds = Counter(_kind(s) for s in scores if not s.passed)
    return kinds.most_common(1)[0][0] if kinds else "none"


def _kind(score: Score) -> str:
    details = score.details
    if details.get("tool_errors") and not details.get("recovered"):
        return "tool_error"
    reason = details.get("end_reason")
    if reason and reason != "completed":
        return str(reason)
    return "wrong"


@dataclass
class _Entry:
    task: Task
    kind: str
    replays: int = 0


@dataclass
class FailureReplay:
    """The bounded per-domain queues of failed tasks (see module docstring)."""

    config: ReplayConfig
    queues: dict[str, OrderedDict[str, _Entry]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=lambda: {
        "replay/drawn": 0.0, "replay/groups": 0.0, "replay/successes": 0.0, "replay/errored": 0.0,
        "replay/recovered": 0.0})  # fmt: skip
    _replayed: set[str] = field(default_factory=set)

    @property
    def enabled(self) -> bool:
        return self.config.share > 0

    def draw(self, num_tasks: int) -> list[Task]:
        """Up to `share * num_tasks` queued tasks, each at most once, taking domains in turn."""
        wanted = int(self.config.share * num_tasks)
        pending = {d: list(q.items()) for d, q in self.queues.items() if q}
        out: list[Task] = []
        while len(out) < wanted and any(pending.values()):
            for domain, entries in pending.items():
                if not entries or len(out) >= wanted:
                    continue
                key, entry = entries.pop(0)
                entry.replays += 1
                queue = self.queues[domain]
                queue.move_to_end(key)
                if entry.replays >= self.config.max_replays:
                    del queue[key]
                out.append(entry.task)
        self._replayed.update(t.id for t in out)
        self.counters["replay/drawn"] += len(out)
        return out

    def observe(self, task: Task, scores: Sequence[Score]) -> None:
        """Record a graded group: queue the task if it failed, drop it when it fully succeeded."""
        if task.id in self._replayed:
            self._count_replayed(task, scores)
        queue = self.queues.setdefault(task.domain_id, OrderedDict())
        if scores and all(s.passed for s in scores):
            queue.pop(task.id, None)
            return
        kind = failure_kind(scores)
        if kind == "none" or (self.config.kinds and kind not in self.config.kinds) or task.id in queue:
            return
        queue[task.id] = _Entry(task, kind)
        while len(queue) > self.config.capacity_per_domain:
            queue.popitem(last=False)

    def _count_replayed(self, task: Task, scores: Sequence[Score]) -> None:
        self._replayed.discard(task.id)
        self.counters["replay/groups"] += 1
        self.counters["replay/successes"] += sum(s.passed for s in scores) / max(len(scores), 1)
        errored = [s for s in scores if s.details.get("tool_errors")]
        self.counters["replay/errored"] += len(errored)
        self.counters["replay/recovered"] += sum(bool(s.details.get("recovered")) for s in errored)

    def metrics(self) -> dict[str, float]:
        """Queue size per failure kind and the replayed groups' success and recovery rates so far."""
        out = dict(self.counters)
        kinds = Counter(e.kind for q in self.queues.values() for e in q.values())
        out["replay/queued"] = float(sum(kinds.values()))
        out.update({f"replay/queued/{k}": float(v) for k, v in kinds.items()})
        if self.counters["replay/groups"]:
            out["replay/success_rate"] = self.counters["replay/successes"] / self.counters["replay/groups"]
        if self.counters["replay/errored"]:
            out["replay/recovery_rate"] = self.counters["replay/recovered"] / self.counters["replay/errored"]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"queues": {d: [(e.task.model_dump(), e.kind, e.replays) for e in q.values()]
                           for d, q in self.queues.items()},
                "counters": dict(self.counters), "replayed": sorted(self._replayed)}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.queues = {d: OrderedDict((t["id"], _Entry(Task.model_validate(t), kind, n)) for t, kind, n in rows)
                       for d, rows in state["queues"].items()}  # fmt: skip
        self.counters = dict(state["counters"])
        self._replayed = set(state["replayed"])
