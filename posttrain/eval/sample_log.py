"""Logged samples: the graded responses a training run keeps in `RUN_DIR/samples.jsonl`, and reading them back.

Each step, `sample_records` draws up to `per_domain` graded samples of every domain, spread over the
domain's groups (one member of each group, in a seeded order, before a second member of any), and turns
them into `LoggedSample`s: the response and prompt cut to a length (head and tail kept), the verifier's
details trimmed to small JSON (scalars, short lists, shallow dicts). The draw depends only on (seed, step,
domain id) and the groups, never on the run's own random state, so logging does not change a run.
Reward-hacking detectors (`posttrain.eval.hacking`) and spot checks (`posttrain.eval.spotcheck`) read
these records; `read_samples` keeps the last record of a (step, task, group member) written twice (a
resumed run logs again the steps after its checkpoint).

Not here: writing the file (`posttrain.train.outputs.Outputs.log_samples`) or judging the samples.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from posttrain.tasks.base import CANARY
from posttrain.types import Group

SAMPLES_FILE = "samples.jsonl"
"""The run directory's sample log."""
MAX_LIST_ITEMS = 32
"""Items kept of a list in details."""
MAX_DETAIL_CHARS = 200
"""Characters kept of a string in details."""
MAX_DETAIL_DEPTH = 2
"""Lists and dicts nested deeper than this in details are dropped."""


@dataclass(frozen=True)
class LoggedSample:
    """One graded response as the run logged it (the schema of a `samples.jsonl` line)."""

    step: int
    """Training step (0-based) whose batch held the sample."""
    domain_id: str
    task_id: str
    group_index: int
    """Position within the task's group of G samples."""
    policy_version: int
    """Weight version that sampled it."""
    response: str
    """The graded text, cut to the log's `max_chars` (head and tail)."""
    num_tokens: int
    """Policy tokens of the response (before cutting)."""
    reward: float
    passed: bool
    error_kind: str
    """`none`, `model` (infra failures are never trained on, so never logged)."""
    details: dict[str, Any] = field(default_factory=dict)
    """The verifier's details, trimmed to small JSON."""
    verifier: str = ""
    """Kind of the verifier that graded it (`exact`, `math`, `code_tests`, ...)."""
    canary: bool = False
    """The task is a canary: no honest response can pass it."""
    prompt: str = ""
    """An excerpt of the prompt (head and tail)."""
    response_chars: int = -1
    """Length of the whole response (more than `len(response)` when the log cut it; -1: not recorded)."""

    @property
    def is_cut(self) -> bool:
        """The logged response is shorter than the graded one (re-grading it would grade something else)."""
        return self.response_chars > len(self.response)

    @property
    def key(self) -> str:
        """`<step>:<task id>:<group index>`, unique within a run."""
        return f"{self.step}:{self.task_id}:{self.group_index}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoggedSample:
        """A record from a parsed line; unknown keys are ignored, optional ones default."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


def sample_records(
    step: int,
    groups: Sequence[Group],
    per_domain: int,
    max_chars: int,
    prompt_chars: int,
    seed: int,
    verifier_of: Callable[[str], Any],
) -> list[LoggedSample]:
    """Up to `per_domain` logged samples of each domain among `groups` (see the module docstring);
    `verifier_of(domain_id)` gives the domain's verifier config (its `kind` is logged)."""
    by_domain: dict[str, list[Group]] = defaultdict(list)
    for group in groups:
        if group.scores:
            by_domain[group.task.domain_id].append(group)
    records = []
    for domain_id in sorted(by_domain):
        kind = str(getattr(verifier_of(domain_id), "kind", ""))
        for group, member in spread_draw(by_domain[domain_id], per_domain, f"{seed}/{step}/{domain_id}"):
            records.append(_record(step, group, member, kind, max_chars, prompt_chars))
    return records


def spread_draw(groups: Sequence[Group], count: int, seed: str) -> list[tuple[Group, int]]:
    """`count` (group, member index) pairs: groups in a seeded order, one member each per round."""
    rng = random.Random(seed)
    order = rng.sample(range(len(groups)), len(groups))
    members = {i: rng.sample(range(len(groups[i].trajectories)), len(groups[i].trajectories)) for i in order}
    chosen: list[tuple[Group, int]] = []
    for round_index in range(max((len(m) for m in members.values()), default=0)):
        for i in order:
            if len(chosen) == count:
                return chosen
            if round_index < len(members[i]):
                chosen.append((groups[i], members[i][round_index]))
    return chosen


def _record(step: int, group: Group, member: int, kind: str, max_chars: int, prompt_chars: int) -> LoggedSample:
    trajectory, score = group.trajectories[member], group.scores[member]
    task = group.task
    return LoggedSample(
        step=step,
        domain_id=task.domain_id,
        task_id=task.id,
        group_index=trajectory.group_index,
        policy_version=trajectory.policy_version,
        response=excerpt(trajectory.response, max_chars),
        num_tokens=trajectory.num_policy_tokens,
        reward=float(score.reward),
        passed=bool(score.passed),
        error_kind=score.error.value,
        details=trim_details(score.details),
        verifier=kind,
        canary=bool(task.metadata.get(CANARY, False)),
        prompt=excerpt(task.prompt_text(), prompt_chars),
        response_chars=len(trajectory.response),
    )


def excerpt(text: str, max_chars: int) -> str:
    """`text` when it fits, else its head and tail around ` [...] ` (the answer is at the end)."""
    if len(text) <= max_chars:
        return text
    marker = " [...] "
    if max_chars <= 2 * len(marker):
        return text[-max_chars:] if max_chars > 0 else ""
    head = max(0, (max_chars - len(marker)) // 4)
    tail = max(0, max_chars - len(marker) - head)
    return text[:head] + marker + (text[-tail:] if tail else "")


def trim_details(details: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Details as small JSON: finite scalars, strings cut, lists of scalars cut, dicts to a depth."""
    out: dict[str, Any] = {}
    for key, value in list(details.items())[:MAX_LIST_ITEMS]:
        kept = _trim_value(value, depth)
        if kept is not _DROP:
            out[str(key)] = kept
    return out


_DROP = object()


def _trim_value(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value[:MAX_DETAIL_CHARS]
    if depth >= MAX_DETAIL_DEPTH:
        return _DROP
    if isinstance(value, list | tuple):
        items = [_trim_value(item, depth + 1) for item in list(value)[:MAX_LIST_ITEMS]]
        return [item for item in items if item is not _DROP]
    if isinstance(value, dict):
        return trim_details(value, depth + 1)
    return _DROP


def read_samples(path: Path) -> list[LoggedSample]:
    """The records of a `samples.jsonl` (the last of any repeated key), in file order; [] when absent."""
    if not path.is_file():
        return []
    latest: dict[str, LoggedSample] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            sample = LoggedSample.from_dict(json.loads(line))
            latest.pop(sample.key, None)
            latest[sample.key] = sample
    return list(latest.values())
