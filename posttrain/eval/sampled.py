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
    max_total_tokens: int = 2048,
) -> dict[str, SampledEval]:
    """pass@1 and pass@k per domain on the same fixed eval set as the greedy evaluation."""
    tasks = [t for d in domain_ids for t in pool.eval_tasks(d, num_tasks)]
    params = [SamplingParams(n=k, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed * 1_000_003 + i,
                             stop_token_ids=renderer.stop_ids) for i in range(len(tasks))]  # fmt: skip
    single = [i for i, t in enumerate(tasks) if not pool.registry.is_episodic(t.domain_id)]
    outputs = engine.generate([GenerationRequest(prompt_ids=tuple(renderer.prompt_ids(tasks[i])), params=params[i])
                               for i in single])  # fmt: skip
    pairs = [(tasks[i], renderer.decode(s.token_ids)) for i, out in zip(single, outputs, strict=True) for s in out.samples]
    scores = iter(score_fn(pairs))
    per_task: dict[int, list[Score]] = {i: [next(scores) for _ in range(k)] for i in single}
    per_task.update(_episodes(engine, renderer, pool, tasks, params, max_total_tokens))
    rows = [(t, per_task[i]) for i, t in enumerate(tasks)]
    return {d: summarise_sampled(d, k, [(t, s) for t, s in rows if t.domain_id == d]) for d in domain_ids}


def _episodes(engine: RolloutEngine, renderer: PromptRenderer, pool: TaskPool, tasks: Sequence[Task],
              params: Sequence[SamplingParams], max_total_tokens: int) -> dict[int, list[Score]]:  # fmt: skip
    """k sampled episodes of each agent task (episode j seeded with the request's seed + j)."""
    from posttrain.envs.runner import EpisodeJob, EpisodeRunner

    agent = [i for i, t in enumerate(tasks) if pool.registry.is_episodic(t.domain_id)]
    if not agent:
        return {}
    runner = EpisodeRunner(engine, renderer, params[agent[0]].model_copy(update={"n": 1, "seed": None}),
                           max_total_tokens=max_total_tokens)  # fmt: skip
    jobs, owners = [], []
    for i in agent:
        base = params[i].seed or 0
        for j in range(params[i].n):
            env = pool.registry.environment(tasks[i].domain_id)
            assert env is not None
            jobs.append(EpisodeJob(tasks[i], env, j, base + j))
            owners.append(i)
    out: dict[int, list[Score]] = {i: [] for i in agent}
    for owner, result in zip(owners, runner.run(jobs), strict=True):
        out[owner].append(result.score)
    return out


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
