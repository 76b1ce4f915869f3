"""One RL run: setup, the loop's steps, checkpoints and cleanup, over components built elsewhere.

`Run` takes its components from the composition root (`posttrain.train.components`: pool, grader,
mixture, model, renderer, engine, learner) and adds the stages and the outputs (metrics, checkpoints,
evals, summary). Each method is one step of the loop, so the loop itself stays a page of pseudocode.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from posttrain.algo import ragged_group_advantages, weights_from_coefficients
from posttrain.curriculum import (
    DomainStats,
    domain_loss_coefficients,
    domain_stats_from_groups,
    fill_informative_groups,
)
from posttrain.curriculum.replay import FailureReplay
from posttrain.eval.agent_metrics import episode_step_metrics
from posttrain.eval.evaluate import DomainEval, evaluate
from posttrain.eval.sampled import evaluate_sampled
from posttrain.train import checkpoint as ckpt
from posttrain.train.components import Components, build_learner
from posttrain.train.config import TrainConfig
from posttrain.train.models import weights_sha256
from posttrain.train.outputs import Outputs
from posttrain.train.policy import TrainBatch
from posttrain.train.stages import RewardStage, RolloutStage
from posttrain.types import Group, Task


class Run:
    """One training run's live objects; use as a context manager (closes workers and writers)."""

    def __init__(self, config: TrainConfig, run_dir: Path, log: Callable[[str], None]) -> None:
        self.config = config
        self.log = log
        torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.rng = random.Random(config.seed)
        self.np_rng = np.random.default_rng(config.seed)
        self.components = parts = Components.build(config, log)
        self.pool, self.mixture, self.engine = parts.pool, parts.mixture, parts.engine
        self.domain_ids = self.pool.registry.ids()
        self.rollout = RolloutStage(parts.engine, parts.renderer, config.rollout, config.seed,
                                    self.pool.registry.environment, self.pool.registry.is_episodic)
        self.reward = RewardStage(parts.grader, config.reward, config.seed)
        self.replay = FailureReplay(config.replay)
        self._stage_busy_s: dict[str, float] = {}
        self.base_model_hash = weights_sha256(parts.model)  # before LoRA wraps it or training moves it
        self.learner = build_learner(parts.model, config)
        self.outputs = Outputs(run_dir, config, self.domain_ids, parts.untrained_ids)

    @classmethod
    def create(cls, config: TrainConfig, run_dir: Path, log: Callable[[str], None]) -> Run:
        return cls(config, run_dir, log)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.components.close()
        self.outputs.close()

    # -- the loop's steps -------------------------------------------------------------------------

    def draw_tasks(self, num_tasks: int) -> list[Task]:
        """`num_tasks` train tasks: failed ones replayed (up to `replay.share`), the rest by the mixture."""
        replayed = self.replay.draw(num_tasks) if self.replay.enabled else []
        counts = self.mixture.batch_counts(num_tasks - len(replayed), self.np_rng)
        return replayed + [t for d, c in counts.items() if c for t in self.pool.sample(d, c, "train", self.rng)]

    def sample_and_score(self, tasks: Sequence[Task], version: int) -> list[Group]:
        graded = [g for g in self.reward.score(self.rollout.generate(tasks, version)) if g.trajectories]
        if self.replay.enabled:
            for group in graded:
                self.replay.observe(group.task, group.scores)
        return graded

    def filter_groups(self, groups: list[Group], step: int) -> tuple[list[Group], list[Group], dict[str, float]]:
        """(kept, every graded group, report): informative groups, refilled within the budget."""
        graded = list(groups)

        def draw(num_groups: int) -> list[Group]:
            extra = self.sample_and_score(self.draw_tasks(num_groups), version=step)
            graded.extend(extra)
            return extra

        kept, report = fill_informative_groups(groups, draw, len(groups), self.config.filter)
        summary = {
            "filtered_fraction": report.fraction_filtered,
            "extra_groups": float(report.num_extra_drawn),
            "padded_groups": float(report.num_padded),
            "gave_up": float(report.gave_up),
            "surplus_groups": float(report.num_surplus),
        }
        return kept, graded, summary

    def make_batch(self, groups: Sequence[Group]) -> TrainBatch:
        trajectories = [t for g in groups for t in g.trajectories]
        rewards = torch.tensor([r for g in groups for r in g.rewards])  # [N]
        group_ids = torch.tensor([i for i, g in enumerate(groups) for _ in g.trajectories])  # [N]
        normalize = self.config.advantage.normalize_std
        advantages = ragged_group_advantages(rewards, group_ids, normalize_std=normalize)
        sample_weights = None
        if self.config.domain_loss != "none":
            loss = self.config.policy.loss
            domain_ids = [t.task.domain_id for t in trajectories]
            counts = [t.num_policy_tokens for t in trajectories]
            # Sampled by weight already: pass weights=None so only the token-length bias is removed.
            coefs = domain_loss_coefficients(domain_ids, counts, None, self.config.domain_loss, sampled_by_weight=True)
            sample_weights = weights_from_coefficients(coefs, counts, loss.aggregation, loss.norm_num_tokens)
        return TrainBatch.from_trajectories(
            trajectories, advantages.tolist(), sample_weights, old_logprobs=self.rollout.exact_old_logprobs
        )

    def domain_stats(self, groups: Sequence[Group]) -> dict[str, DomainStats]:
        by_domain: dict[str, list[Group]] = defaultdict(list)
        for group in groups:
            by_domain[group.task.domain_id].append(group)
        return {
            d: domain_stats_from_groups(
                [g.rewards for g in gs], [[s.passed for s in g.scores] for g in gs],
                response_tokens=[[t.num_policy_tokens for t in g.trajectories] for g in gs],
            )
            for d, gs in by_domain.items()
        }

    def step_metrics(self, groups: Sequence[Group]) -> dict[str, float]:
        """The step's agent metrics per domain, per-turn token accounting and replay counters."""
        out = episode_step_metrics([(g.task.domain_id, s) for g in groups for s in g.scores])
        out.update(self.episode_tokens(groups))
        if self.replay.enabled:
            out.update(self.replay.metrics())
        return out

    def episode_tokens(self, groups: Sequence[Group]) -> dict[str, float]:
        """Per-turn token accounting of the step's agent episodes (empty when there were none)."""
        episodes = [t for g in groups for t in g.trajectories if t.metadata.get("episode")]
        if not episodes:
            return {}
        turns = [turn for t in episodes for turn in t.metadata.get("turns", [])]
        count = max(len(turns), 1)
        return {
            "episode/episodes": float(len(episodes)),
            "episode/turns": len(turns) / len(episodes),
            "episode/policy_tokens_per_turn": sum(turn["generated"] for turn in turns) / count,
            "episode/new_prompt_tokens_per_turn": sum(turn["new_prompt_tokens"] for turn in turns) / count,
            "episode/prompt_tokens_per_turn": sum(turn["prompt_tokens"] for turn in turns) / count,
            "episode/tokens": sum(len(t.token_ids) for t in episodes) / len(episodes),
        }

    def log_step(self, step: int, metrics: dict[str, float], stats: dict[str, DomainStats],
                 weights: dict[str, float], report: dict[str, float]) -> None:
        self.outputs.log_step(step, metrics | self.stage_times(), stats, weights, report, self.reward.num_infra_failures)

    def stage_times(self) -> dict[str, float]:
        """Seconds spent generating and grading since the last call (one step's, with its refills)."""
        busy = {"time/generate_s": self.rollout.busy_s, "time/verify_s": self.reward.busy_s}
        out = {key: value - self._stage_busy_s.get(key, 0.0) for key, value in busy.items()}
        self._stage_busy_s = busy
        return out

    def maybe_eval_and_checkpoint(self, step: int) -> None:
        every = self.config.eval.every_steps
        if every and (step + 1) % every == 0 and step + 1 < self.config.steps:
            self.evaluate(f"step{step + 1}")
        every = self.config.checkpoint_every
        if (every and (step + 1) % every == 0) or step + 1 == self.config.steps:
            self.save(step + 1)

    # -- evaluation, checkpoints, summary ---------------------------------------------------------

    def evaluate(self, label: str) -> dict[str, DomainEval]:
        cfg = self.config.eval
        result = evaluate(
            self.engine,
            self.components.renderer,
            self.pool,
            self.domain_ids,
            self.components.grader.grade,
            num_tasks=cfg.tasks_per_domain,
            max_new_tokens=cfg.max_new_tokens,
            max_total_tokens=self.config.rollout.episode.max_total_tokens,
        )
        self.outputs.write_eval(label, result)
        if cfg.samples_per_task:
            sampled = evaluate_sampled(
                self.engine, self.components.renderer, self.pool, self.domain_ids, self.components.grader.grade,
                num_tasks=cfg.tasks_per_domain, max_new_tokens=cfg.max_new_tokens, k=cfg.samples_per_task,
                temperature=self.config.rollout.temperature, seed=self.config.seed,
                max_total_tokens=self.config.rollout.episode.max_total_tokens,
            )
            self.outputs.write_sampled_eval(label, sampled)
        return result

    def saved_eval(self, label: str) -> dict[str, DomainEval]:
        return self.outputs.read_eval(label)

    def save(self, step: int) -> None:
        extra = {
            "loop_step": step,
            "mixture": self.mixture.state_dict(),
            "rng": self.rng.getstate(),
            "np_rng": self.np_rng.bit_generator.state,
            "rollout_calls": self.rollout.num_calls,
            "replay": self.replay.state_dict(),
        }
        ckpt.save_checkpoint(self.outputs.run_dir, self.learner.state_dict(), extra=extra, keep_last=2)

    def resume(self) -> int:
        """Restore the latest checkpoint in the run dir; returns the step to continue from (0 if none)."""
        path = ckpt.latest_checkpoint(self.outputs.run_dir)
        if path is None:
            return 0
        saved = ckpt.load_checkpoint(path)
        self.learner.load_state_dict(saved.state)
        step, extra = int(saved.extra["loop_step"]), saved.extra
        self.mixture.load_state_dict(extra["mixture"])
        self.rng.setstate(extra["rng"])
        self.np_rng.bit_generator.state = extra["np_rng"]
        self.rollout.num_calls = int(extra["rollout_calls"])
        if "replay" in extra:
            self.replay.load_state_dict(extra["replay"])
        self.engine.update_weights(self.learner.policy_state(), version=step)
        self.log(f"resumed from {path} at step {step}")
        return step

    def write_summary(self, base: dict[str, DomainEval], final: dict[str, DomainEval]) -> dict[str, Any]:
        return self.outputs.write_summary(base, final, self.config.steps, self.base_model_hash)

