"""The pipeline stages the loop composes: sample (rollout), reward (verify), and batch assembly.

Each stage has a narrow interface (tasks in, groups out; groups in, scores filled) so it can later run
as its own worker pool without the loop changing. A `Group` is one task with its G samples and scores.
Infra failures are re-graded up to `infra_retries` times; samples still failing are dropped from the
group and never reach the policy update.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrain.rollout.api import GenerationRequest, RolloutEngine, SamplingParams
from posttrain.tasks.pool import TaskPool
from posttrain.train.config import RewardConfig, RolloutConfig
from posttrain.train.prompting import render_prompt_ids, stop_ids
from posttrain.types import Sample, Score, Task
from posttrain.verify import RunnerConfig, VerifierRunner


@dataclass
class Group:
    """One task's G samples and, once graded, their scores (same order)."""

    task: Task
    samples: list[Sample]
    scores: list[Score] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.scores]

    @property
    def is_informative(self) -> bool:
        """At least two distinct rewards: the group carries a GRPO learning signal."""
        return len(set(self.rewards)) > 1


class RolloutStage:
    """Tasks -> groups of samples, through any RolloutEngine."""

    def __init__(self, engine: RolloutEngine, tokenizer: Any, config: RolloutConfig, seed: int) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.config = config
        self.seed = seed
        self.stop_ids = stop_ids(tokenizer)
        self.num_calls = 0

    def generate(self, tasks: Sequence[Task], version: int) -> list[Group]:
        self.num_calls += 1
        prompts = [render_prompt_ids(self.tokenizer, t, self.config.system_prompt) for t in tasks]
        requests = [
            GenerationRequest(prompt_ids=tuple(ids), params=self._params(i)) for i, ids in enumerate(prompts)
        ]
        outputs = self.engine.generate(requests)
        groups = []
        for task, ids, out in zip(tasks, prompts, outputs, strict=True):
            samples = [
                Sample(
                    task=task,
                    response=self.tokenizer.decode(s.token_ids, skip_special_tokens=True),
                    group_index=j,
                    prompt_token_ids=ids,
                    token_ids=list(s.token_ids),
                    logprobs=list(s.logprobs),
                    finish_reason=s.finish_reason,
                    policy_version=version,
                )
                for j, s in enumerate(out.samples)
            ]
            groups.append(Group(task, samples))
        return groups

    def _params(self, index: int) -> SamplingParams:
        cfg = self.config
        # Distinct, reproducible seeds per (run seed, call, request): reruns sample the same tokens.
        seed = (self.seed * 1_000_003 + self.num_calls * 10_007 + index * 101) % 2**31
        return SamplingParams(
            n=cfg.group_size,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            seed=seed,
            stop_token_ids=self.stop_ids,
            # log_softmax(logits / T): what the update computes for the same weights (see `exact_old_logprobs`).
            logprobs_mode="processed",
        )

    @property
    def exact_old_logprobs(self) -> bool:
        """Whether sampled logprobs equal the update's: not under top-k/top-p truncation, which the
        update does not apply (the trainer then recomputes them before its first epoch)."""
        return self.config.top_p == 1.0 and self.config.top_k == 0


class RewardStage:
    """Fills each group's scores; the verifiers run in worker processes."""

    def __init__(self, pool: TaskPool, config: RewardConfig, seed: int) -> None:
        self.pool = pool
        self.config = config
        self.rng = random.Random(seed)
        runner_config = RunnerConfig(num_workers=max(config.workers, 1), in_process=config.workers == 0)
        self.runner = VerifierRunner(runner_config)
        self.num_infra_failures = 0

    def score(self, groups: Sequence[Group]) -> None:
        samples = [s for g in groups for s in g.samples]
        scores = self._grade(samples)
        for _ in range(self.config.infra_retries):
            retry = [i for i, s in enumerate(scores) if s.is_infra_failure]
            if not retry:
                break
            for i, score in zip(retry, self._grade([samples[i] for i in retry]), strict=True):
                scores[i] = score
        position = 0
        for group in groups:
            pairs = list(zip(group.samples, scores[position : position + len(group.samples)], strict=True))
            position += len(group.samples)
            kept = [(s, sc) for s, sc in pairs if not sc.is_infra_failure]
            self.num_infra_failures += len(pairs) - len(kept)
            group.samples = [s for s, _ in kept]
            group.scores = [sc for _, sc in kept]

    def score_pairs(self, pairs: Sequence[tuple[Task, str]]) -> list[Score]:
        """Grade (task, response) pairs with the domains' verifiers (evaluation: never the control coin)."""
        items = [(t, r, self.pool.registry.get(t.domain_id).verifier) for t, r in pairs]
        return self.runner.score_batch(items)

    def _grade(self, samples: Sequence[Sample]) -> list[Score]:
        if self.config.mode == "random":
            return [_coin(self.rng) for _ in samples]
        return self.score_pairs([(s.task, s.response) for s in samples])

    def close(self) -> None:
        self.runner.close()


def _coin(rng: random.Random) -> Score:
    """The control run's reward: independent of the response, so there is nothing to learn."""
    return Score.correct(control="random") if rng.random() < 0.5 else Score.wrong(message="random control")



def make_engine(backend: str, model: Any) -> RolloutEngine:
    """The rollout engine for `backend` over the live policy module (shared, not copied)."""
    from posttrain.rollout import HFEngine, NativeEngine

    factories: dict[str, Any] = {"native": NativeEngine, "hf": HFEngine}
    return factories[backend](model)
