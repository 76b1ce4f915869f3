"""Per-domain evaluation of a policy on the eval split.

Greedy decoding (temperature 0) on a fixed eval set per domain (`TaskPool.eval_tasks`), prompts
rendered by the rollout package's `PromptRenderer`, graded by a score function (a `Grader`'s `grade`).
Infra failures are counted apart and excluded from reward and pass rate. Generation goes through any
`RolloutEngine`, so the same code evaluates HF, native and vLLM backends. Agent domains are played as
greedy episodes through the `EpisodeRunner` and graded by their environments (the score function is
not used for them); their response length is the episode's policy tokens, and their `agent` field holds
`posttrain.eval.agent_metrics.episode_metrics` (success, completion, tool-call success, recovery). A
domain without episodes keeps `agent` empty and its `to_dict` as it was.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from posttrain.eval.agent_metrics import episode_metrics
from posttrain.eval.stats import bootstrap_ci
from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.rollout.prompting import PromptRenderer
from posttrain.tasks.pool import TaskPool
from posttrain.types import Score, Task

ScoreFn = Callable[[Sequence[tuple[Task, str]]], list[Score]]
"""Grades (task, response) pairs in order."""


@dataclass(frozen=True)
class DomainEval:
    """One domain's evaluation result, with the per-task scores a paired comparison needs."""

    domain_id: str
    num_tasks: int
    mean_reward: float
    pass_rate: float
    infra_errors: int
    mean_response_tokens: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    """95% bootstrap interval of `mean_reward` (`posttrain.eval.stats`)."""
    task_ids: tuple[str, ...] = ()
    rewards: tuple[float, ...] = ()
    """Graded tasks (infra failures left out) and their rewards, in the same order."""
    agent: dict[str, float] = field(default_factory=dict)
    """Episode metrics (`episode_metrics`) of an agent domain; empty for any other domain."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `agent` only when not empty (single-turn evaluations read as before)."""
        data = asdict(self)
        if not self.agent:
            del data["agent"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DomainEval:
        """The inverse of `to_dict` (JSON lists back to tuples)."""
        return cls(**{**data, "task_ids": tuple(data.get("task_ids", ())), "rewards": tuple(data.get("rewards", ()))})


def evaluate(
    engine: RolloutEngine,
    renderer: PromptRenderer,
    pool: TaskPool,
    domain_ids: Sequence[str],
    score_fn: ScoreFn,
    num_tasks: int = 32,
    max_new_tokens: int = 32,
    max_total_tokens: int = 2048,
) -> dict[str, DomainEval]:
    """Greedy pass rate and mean reward per domain on a fixed eval set (`max_total_tokens` bounds an
    agent episode's whole token sequence)."""
    tasks = [t for d in domain_ids for t in pool.eval_tasks(d, num_tasks)]
    episodic = [pool.registry.is_episodic(t.domain_id) for t in tasks]
    single = [t for t, e in zip(tasks, episodic, strict=True) if not e]
    responses, single_lengths = generate_greedy(engine, renderer, single, max_new_tokens)
    single_scores = score_fn(list(zip(single, responses, strict=True))) if single else []
    agent = [t for t, e in zip(tasks, episodic, strict=True) if e]
    agent_scores, agent_lengths = play_greedy(engine, renderer, pool, agent, max_new_tokens, max_total_tokens)
    merged = _merge(episodic, list(zip(single_scores, single_lengths, strict=True)),
                    list(zip(agent_scores, agent_lengths, strict=True)))  # fmt: skip
    return summarise(tasks, [s for s, _ in merged], [n for _, n in merged], domain_ids)


def play_greedy(engine: RolloutEngine, renderer: PromptRenderer, pool: TaskPool, tasks: Sequence[Task],
                max_new_tokens: int, max_total_tokens: int) -> tuple[list[Score], list[int]]:  # fmt: skip
    """One greedy episode per agent task: its grade and its policy token count."""
    from posttrain.envs.runner import EpisodeJob, EpisodeRunner

    if not tasks:
        return [], []
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, temperature=0.0, stop_token_ids=renderer.stop_ids)
    runner = EpisodeRunner(engine, renderer, params, max_total_tokens=max_total_tokens)
    jobs = []
    for task in tasks:
        env = pool.registry.environment(task.domain_id)
        assert env is not None
        jobs.append(EpisodeJob(task, env, make_env=functools.partial(_environment, pool, task.domain_id)))
    results = runner.run(jobs)
    return [r.score for r in results], [r.trajectory.num_policy_tokens for r in results]


def _environment(pool: TaskPool, domain_id: str) -> Any:
    return pool.registry.environment(domain_id)


def _merge(episodic: Sequence[bool], single: list[Any], agent: list[Any]) -> list[Any]:
    """Interleave two result lists back into task order."""
    a, b = iter(single), iter(agent)
    return [next(b) if e else next(a) for e in episodic]


def generate_greedy(
    engine: RolloutEngine, renderer: PromptRenderer, tasks: Sequence[Task], max_new_tokens: int
) -> tuple[list[str], list[int]]:
    """One greedy response per task, decoded without special tokens, and its token count."""
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, temperature=0.0, stop_token_ids=renderer.stop_ids)
    requests = [GenerationRequest(prompt_ids=tuple(renderer.prompt_ids(t)), params=params) for t in tasks]
    outputs = engine.generate(requests)
    texts = [renderer.decode(o.samples[0].token_ids) for o in outputs]
    return texts, [len(o.samples[0].token_ids) for o in outputs]


def summarise(
    tasks: Sequence[Task], scores: Sequence[Score], lengths: Sequence[int], domain_ids: Sequence[str]
) -> dict[str, DomainEval]:
    out: dict[str, DomainEval] = {}
    for domain_id in domain_ids:
        rows = [(t, s, n) for t, s, n in zip(tasks, scores, lengths, strict=True) if t.domain_id == domain_id]
        graded = [(t, s, n) for t, s, n in rows if not s.is_infra_failure]
        count = max(len(graded), 1)
        rewards = tuple(s.reward for _, s, _ in graded)
        ci_low, ci_high = bootstrap_ci(rewards)
        out[domain_id] = DomainEval(
            domain_id=domain_id,
            num_tasks=len(graded),
            mean_reward=sum(rewards) / count,
            pass_rate=sum(s.passed for _, s, _ in graded) / count,
            infra_errors=len(rows) - len(graded),
            mean_response_tokens=sum(n for _, _, n in graded) / count,
            ci_low=ci_low,
            ci_high=ci_high,
            task_ids=tuple(t.id for t, _, _ in graded),
            rewards=rewards,
            agent=episode_metrics([s for _, s, _ in rows]),
        )
    return out
