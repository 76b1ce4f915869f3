"""Sampled evaluation: k responses per eval task at the training temperature; pass@1 and pass@k.

pass@1 is the mean over tasks of each task's share of passing samples (the unbiased estimate from k
samples); pass@k is the share of tasks with at least one passing sample among its k. Each request is
seeded from (seed, task position), so base and trained models are sampled with the same random numbers
on the same tasks, which keeps a paired comparison tight. Infra failures are left out of a task's k; a
task with no graded sample is left out. An agent domain also gets the episode metrics of all its samples
(`agent`, as in `DomainEval`). Not here: greedy evaluation (`posttrain.eval.evaluate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.eval.agent_metrics import episode_metrics
from posttrain.eval.evaluate import ScoreFn
from posttrain.eval.stats import bootstrap_ci
from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.rollout.prompting import PromptRenderer
from posttrain.tasks.pool import TaskPool
from posttrain.types import Score, Task


@dataclass(frozen=True)
class SampledEval:
    """One domain's sampled evaluation."""

    domain_id: str
    k: int
    pass_at_1: float
    """Mean over tasks of passed / graded samples."""
    pass_at_k: float
    """Share of tasks with at least one passing sample."""
    ci_low: float
    ci_high: float
    """95% bootstrap interval of `pass_at_1`."""
    task_ids: tuple[str, ...]
    fractions: tuple[float, ...]
    """Per task, passed / graded samples (what a paired comparison pairs)."""
    agent: dict[str, float] = field(default_factory=dict)
    """Episode metrics over every sample of an agent domain; empty for any other domain."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `agent` only when not empty."""
        data = asdict(self)
        if not self.agent:
            del data["agent"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SampledEval:
        return cls(**{**data, "task_ids": tuple(data["task_ids"]), "fractions": tuple(data["fractions"])})


def evaluate_sampled(
    engine: RolloutEngine,
    renderer: PromptRenderer,
    pool: TaskPool,
    domain_ids: Sequence[str],
    score_fn: ScoreFn,
    num_tasks: int,
    max_new_tokens: int,
    k: int,
    temperature: float,
    seed: int = 0,
) -> dict[str, SampledEval]:
    """pass@1 and pass@k per domain on the same fixed eval set as the greedy evaluation."""
    tasks = [t for d in domain_ids for t in pool.eval_tasks(d, num_tasks)]
    requests = [
        GenerationRequest(prompt_ids=tuple(renderer.prompt_ids(t)), params=SamplingParams(
            n=k, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed * 1_000_003 + i,
            stop_token_ids=renderer.stop_ids))
        for i, t in enumerate(tasks)
    ]
    outputs = engine.generate(requests)
    pairs = [(t, renderer.decode(s.token_ids)) for t, out in zip(tasks, outputs, strict=True) for s in out.samples]
    scores = score_fn(pairs)
    per_task = [scores[i * k : (i + 1) * k] for i in range(len(tasks))]
    return {d: summarise_sampled(d, k, [(t, s) for t, s in zip(tasks, per_task, strict=True) if t.domain_id == d])
            for d in domain_ids}


def summarise_sampled(domain_id: str, k: int, rows: Sequence[tuple[Task, Sequence[Score]]]) -> SampledEval:
    """Aggregate each task's k scores (see the module docstring)."""
    task_ids, fractions, any_passed = [], [], []
    for task, scores in rows:
        graded = [s for s in scores if not s.is_infra_failure]
        if not graded:
            continue
        passed = sum(s.passed for s in graded)
        task_ids.append(task.id)
        fractions.append(passed / len(graded))
        any_passed.append(passed > 0)
    low, high = bootstrap_ci(fractions)
    count = len(fractions)
    return SampledEval(
        domain_id=domain_id,
        k=k,
        pass_at_1=sum(fractions) / count if count else math.nan,
        pass_at_k=sum(any_passed) / count if count else math.nan,
        ci_low=low,
        ci_high=high,
        task_ids=tuple(task_ids),
        fractions=tuple(fractions),
        agent=episode_metrics([s for _, scores in rows for s in scores]),
    )
