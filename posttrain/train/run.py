"""One RL run: setup, the loop's steps, checkpoints and cleanup, over components built elsewhere.

`Run` takes its components from the composition root (`posttrain.train.components`: pool, grader,
mixture, model, renderer, engine, learner) and adds the stages and the outputs (metrics, checkpoints,
evals, summary). Each method is one step of the loop, so the loop itself stays a page of pseudocode.

`dist.mode: async` (docs/async.md): `collect` hands the loop data an `AheadProducer` made while the learner
updated on the step before; the engine then generates from its own copy of the policy (the learner
changes its module in place), weight sync is deferred to the producer, the staleness rule of
`posttrain.sched.staleness` applies to each batch, and evaluation and checkpoints first drain the
producer. A checkpoint holds the data made ahead, so a resumed run continues exactly.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
from posttrain.rollout import RolloutEngine
from posttrain.sched.staleness import StalenessReport, apply_staleness
from posttrain.train import checkpoint as ckpt
from posttrain.train.best_passing import BestPassing
from posttrain.train.components import Components, build_learner, build_rollout_engine
from posttrain.train.config import TrainConfig
from posttrain.train.models import weights_sha256
from posttrain.train.outputs import Outputs
from posttrain.train.policy import TrainBatch
from posttrain.train.producer import AheadProducer, WeightState
from posttrain.train.stages import RewardStage, RolloutStage
from posttrain.train.tracking import check_backends
from posttrain.types import Group, Task


@dataclass(frozen=True)
class StepData:
    """The data side of one step as the learner receives it, made now or ahead by the producer."""

    weights: dict[str, float]
    """The mixture's weights the step's tasks were drawn with."""
    kept: list[Group]
    """The groups to learn from."""
    graded: list[Group]
    """Every graded group, kept or not (for statistics)."""
    report: dict[str, float]
    """The dynamic-sampling filter's report."""
    stats: dict[str, DomainStats]
    """Per-domain statistics of `graded`."""
    metrics: dict[str, float]
    """Agent, episode-token and replay metrics of the step."""
    infra_failures: int
    """Infra failures of the run so far, counted when the step's data was made."""
    overlap_s: float = 0.0
    """async: seconds the making of this data overlapped the learner's work."""


Produce = Callable[["Run", int, int], StepData]
"""(run, step, weight version) -> the step's data: the loop's data side."""


class Run:
    """One training run's live objects; use as a context manager (closes workers and writers)."""

    def __init__(self, config: TrainConfig, run_dir: Path, log: Callable[[str], None]) -> None:
        self.config = config
        self.log = log
        check_backends(config.tracking)  # a selected tracker that is missing fails before any model loads
        torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        self.rng = random.Random(config.seed)
        self.np_rng = np.random.default_rng(config.seed)
        self.components = parts = Components.build(config, log)
        self.pool, self.mixture = parts.pool, parts.mixture
        self.domain_ids = self.pool.registry.ids()
        self.base_model_hash = weights_sha256(parts.model)  # before LoRA wraps it or training moves it
        try:
            self.learner = build_learner(parts.model, config)
        except BaseException:
            parts.close()
            raise
        self.is_async = config.dist.mode == "async"
        if self.is_async and getattr(parts.engine, "model", None) is self.learner.causal_lm:
            parts.engine = self._own_engine()
        self.engine = parts.engine
        self.rollout = RolloutStage(parts.engine, parts.renderer, config.rollout, config.seed,
                                    self.pool.registry.environment, self.pool.registry.is_episodic)
        self.reward = RewardStage(parts.grader, config.reward, config.seed)
        self.replay = FailureReplay(config.replay)
        self._stage_busy_s: dict[str, float] = {}
        self.outputs = Outputs(run_dir, config, self.domain_ids, parts.untrained_ids)
        self.weights_version = 0
        """The weight version the engine holds (async: loaded by the producer thread, read while it is idle)."""
        self.producer: AheadProducer[StepData] | None = None
        self._restored: dict[int, StepData] = {}
        self._weights_s = 0.0
        self.best = (BestPassing(run_dir, config.eval.gate, self.domain_ids, parts.trained_ids)
                     if config.eval.gate.enabled else None)  # fmt: skip

    @classmethod
    def create(cls, config: TrainConfig, run_dir: Path, log: Callable[[str], None]) -> Run:
        return cls(config, run_dir, log)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.producer is not None:
            self.producer.close()
        close_learner = getattr(self.learner, "close", None)  # a Ray learner group, before Ray stops
        if close_learner is not None:
            close_learner()
        self.components.close()
        self.outputs.close()

    def _own_engine(self) -> RolloutEngine:
        """An engine over a copy of the policy: the producer generates while the learner changes its
        module in place, so sharing it would mix two weight versions in one generation."""
        module = copy.deepcopy(self.learner.causal_lm).requires_grad_(False)
        return build_rollout_engine(self.config.rollout, module, self.config.model)

    # -- the loop's steps -------------------------------------------------------------------------

    def collect(self, step: int, produce: Produce) -> StepData:
        """The data of `step`: made now (sync), or made while the learner updated on the step before
        (async; this call starts making the next step's)."""
        if not self.is_async:
            restored = self._restored.pop(step, None)  # an async run's checkpoint resumed in sync mode
            return restored if restored is not None else produce(self, step, self.weights_version)
        if self.producer is None:
            self.producer = AheadProducer(functools.partial(produce, self), self._load_weights,
                                          self.weights_version, self.config.steps)  # fmt: skip
            self.producer.restore(self._restored)
            self._restored = {}
        data, overlap_s = self.producer.collect(step)
        return replace(data, overlap_s=overlap_s)

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

    def filter_groups(
        self, groups: list[Group], step: int, version: int
    ) -> tuple[list[Group], list[Group], dict[str, float]]:
        """(kept, every graded group, report): informative groups, refilled (with weights `version`)
        within the budget; the step's samples are logged."""
        graded = list(groups)

        def draw(num_groups: int) -> list[Group]:
            extra = self.sample_and_score(self.draw_tasks(num_groups), version=version)
            graded.extend(extra)
            return extra

        kept, report = fill_informative_groups(groups, draw, len(groups), self.config.filter)
        self.outputs.log_samples(step, graded, self.pool.registry.verifier_config)
        summary = {
            "filtered_fraction": report.fraction_filtered,
            "extra_groups": float(report.num_extra_drawn),
            "padded_groups": float(report.num_padded),
            "gave_up": float(report.gave_up),
            "surplus_groups": float(report.num_surplus),
        }
        return kept, graded, summary

    def make_batch(self, groups: Sequence[Group], step: int) -> tuple[TrainBatch, StalenessReport | None]:
        """The batch to learn from at `step`, and in async mode the staleness rule's report (samples
        beyond `dist.max_staleness` dropped or down-weighted)."""
        stale = self._staleness(groups, step) if self.is_async else None
        if stale is not None and stale.num_dropped:
            weights = iter(stale.weights)
            groups = [_subset(g, [next(weights) is not None for _ in g.trajectories]) for g in groups]
            groups = [g for g in groups if g.trajectories]
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
        if stale is not None and not stale.all_fresh:
            factors = [w for w in stale.weights if w is not None]
            sample_weights = [w * f for w, f in zip(sample_weights or [1.0] * len(factors), factors, strict=True)]
        # async: the recorded sampling logprobs are the behaviour policy even under top-k/top-p (a
        # recomputation with the learner's weights would hide the samples' staleness from the ratio).
        exact = self.rollout.exact_old_logprobs or self.is_async
        batch = TrainBatch.from_trajectories(trajectories, advantages.tolist(), sample_weights, old_logprobs=exact)
        return batch, stale

    def _staleness(self, groups: Sequence[Group], step: int) -> StalenessReport:
        versions = [t.policy_version for g in groups for t in g.trajectories]
        dist = self.config.dist
        return apply_staleness(versions, learner_version=step, max_staleness=dist.max_staleness, policy=dist.stale)

    def update(self, batch: TrainBatch) -> dict[str, float]:
        """One policy update; none when the staleness rule left nothing to learn from."""
        return self.learner.step(batch) if len(batch) else {"update_skipped": 1.0}

    def sync_weights(self, version: int) -> None:
        """Send the learner's weights to the engine: now (sync), or to the producer, which loads them
        before it next generates (async: a copy, since the learner keeps changing its own)."""
        start_s = time.perf_counter()
        if self.producer is None:
            self._load_weights(self.learner.policy_state(), version)
        else:
            state = {k: v.detach().clone() for k, v in self.learner.policy_state().items()}
            self.producer.post_weights(state, version)
        self._weights_s = time.perf_counter() - start_s

    def _load_weights(self, state: WeightState, version: int) -> None:
        self.engine.update_weights(state, version=version)
        self.weights_version = version

    def _quiesce(self) -> None:
        """Let the caller use the engine and save state: no job in flight, the latest weights loaded."""
        if self.producer is not None:
            self.producer.drain()

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

    def log_step(self, step: int, metrics: dict[str, float], data: StepData, stale: StalenessReport | None) -> None:
        metrics = metrics | data.metrics | self.stage_times() | {"sync/weights_s": self._weights_s}
        if stale is not None:
            metrics |= {"async/staleness_mean": stale.mean, "async/staleness_max": float(stale.max),
                        "async/dropped_stale": float(stale.num_dropped), "async/overlap_s": data.overlap_s}
        self.outputs.log_step(step, metrics, data.stats, data.weights, data.report, data.infra_failures)

    def stage_times(self) -> dict[str, float]:
        """Seconds spent generating and grading since the last call (one step's, with its refills; in
        async mode the producer's work finished since the last step)."""
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
        self._quiesce()
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
        if self.best is not None and label != "base":
            step = int(label.removeprefix("step")) if label.startswith("step") else self.config.steps
            self.best.observe(label, step, self.saved_eval("base"), result, self.learner.state_dict)
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
        self._quiesce()
        extra = {
            "loop_step": step,
            "mixture": self.mixture.state_dict(),
            "rng": self.rng.getstate(),
            "np_rng": self.np_rng.bit_generator.state,
            "reward_rng": self.reward.rng.getstate(),
            "rollout_calls": self.rollout.num_calls,
            "replay": self.replay.state_dict(),
            "ahead": self.producer.ready() if self.producer is not None else {},
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
        if "reward_rng" in extra:  # checkpoints from before it was saved restart the control's coin
            self.reward.rng.setstate(extra["reward_rng"])
        self.rollout.num_calls = int(extra["rollout_calls"])
        if "replay" in extra:
            self.replay.load_state_dict(extra["replay"])
        self._restored = dict(extra.get("ahead", {}))  # data the producer had made ahead (async)
        self._load_weights(self.learner.policy_state(), step)
        self.outputs.rewind(step)
        self.log(f"resumed from {path} at step {step}")
        return step

    def write_summary(self, base: dict[str, DomainEval], final: dict[str, DomainEval]) -> dict[str, Any]:
        summary = self.outputs.write_summary(base, final, self.config.steps, self.base_model_hash)
        if self.best is not None:
            summary["gate"] = self.best.summary()
            (self.outputs.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary



def _subset(group: Group, keep: Sequence[bool]) -> Group:
    """The group with only the trajectories (and their scores) marked in `keep`."""
    pairs = [(t, s) for t, s, k in zip(group.trajectories, group.scores, keep, strict=True) if k]
    return Group(task=group.task, trajectories=tuple(t for t, _ in pairs), scores=tuple(s for _, s in pairs))
