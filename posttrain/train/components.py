"""The composition root: every live component of a run is built from config here, and only here.

`Components.build(config)` gives the task pool (registry inside), the grader, the domain mixture, the
model and tokenizer, the prompt renderer and the rollout engine; `build_learner` adds the policy
trainer. Training (`Run`), evaluation (`posttrain eval`), the base-model build and the benches all
call these functions, so each component is wired one way. The engine starts out sharing the policy
module (weight sync then copies nothing); every component takes its own config section only.

Where the engine and the grader live is `build_stage_backends`' choice (`config.dist.backend`): `local`
gives the objects above and never imports Ray; `ray` joins or starts a Ray cluster and gives a
`RayEnginePool` (each rollout worker builds its engine with `rollout_engine(config)`: its own copy of the
model, LoRA-wrapped like the learner's so weight sync sends the same names; without LoRA the driver's
weights are sent once at the start, as version 0) and a `RayGraderPool` (each
reward worker builds `reward_grader(config)`, so its verifiers and sandboxes run on its host). The learner
stays in this process unless `dist.learner_workers` asks for a `RayLearnerGroup` (each rank builds its
trainer with `learner_rank(config, rank, world_size)`); evaluation generates and grades through the same pools.
Not here: the loop, checkpoints, outputs (`posttrain.train.run`); the pools (`posttrain.dist`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from posttrain.curriculum import DomainMixture, build_mixture_for_specs
from posttrain.errors import ConfigError
from posttrain.rollout import PromptRenderer, RolloutEngine, build_engine
from posttrain.tasks.pool import TaskPool
from posttrain.train.config import ModelConfig, RewardConfig, RolloutConfig, TrainConfig
from posttrain.verify import ExecutorConfig, Grader, GradingBackend

Log = Callable[[str], None]


def build_grader(pool: TaskPool, config: RewardConfig) -> Grader:
    """The grader of the pool's domains: verifier workers, or inline when `workers` is 0."""
    return pool.registry.grader(ExecutorConfig(num_workers=config.workers))


def build_policy(config: TrainConfig, log: Log) -> tuple[Any, Any]:
    """(model, tokenizer) of `config.model`; the tiny preset is built (or reused) for `config.domains`."""
    from posttrain.train.warm_start import resolve_model

    return resolve_model(config, log)


def build_rollout_engine(config: RolloutConfig, model: Any, model_config: ModelConfig) -> RolloutEngine:
    """The configured engine over the live policy module (vLLM loads the model's directory instead)."""
    return build_engine(config.engine, model, model_path=model_config.path)


def build_learner(model: Any, config: TrainConfig) -> Any:
    """The policy trainer over `model` (LoRA adapters are injected in place, so an engine sharing the
    module sees them); with `dist.learner_workers` a `RayLearnerGroup` of that many ranks instead, each
    building its own model (`learner_rank`), inside the Ray session the stage backends started."""
    if config.dist.learner_workers:
        from posttrain.dist.learner_group import RayLearnerGroup
        from posttrain.dist.workers import WorkerOptions

        options = WorkerOptions(num_cpus=config.dist.worker_cpus, num_gpus=config.dist.learner_worker_gpus)
        factory = functools.partial(learner_rank, config)
        return RayLearnerGroup(factory, config.dist.learner_workers, options, config.dist.startup_timeout_s)
    from posttrain.train.policy import PolicyTrainer

    return PolicyTrainer(model, config.policy)


def learner_rank(config: TrainConfig, rank: int, world_size: int) -> Any:
    """A learner rank's trainer: the run's model built in the rank's process, seeded as the driver; data
    parallel over the group's process group (already joined) when there is more than one rank."""
    import torch

    from posttrain.train.data_parallel import DataParallel
    from posttrain.train.policy import PolicyTrainer

    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    model, _ = build_policy(config, lambda _: None)
    parallel = DataParallel(rank, world_size) if world_size > 1 else None
    return PolicyTrainer(model, config.policy, parallel=parallel)


@dataclass
class StageBackends:
    """The rollout engine and grader of a run; `close()` stops them (and a Ray cluster the run started)."""

    engine: RolloutEngine
    grader: GradingBackend
    close: Callable[[], None]


def build_stage_backends(config: TrainConfig, pool: TaskPool, model: Any) -> StageBackends:
    """The engine and grader `config.dist` asks for (see module docstring)."""
    if config.dist.backend == "local":
        grader = build_grader(pool, config.reward)
        return StageBackends(build_rollout_engine(config.rollout, model, config.model), grader, grader.close)
    return _ray_backends(config, model)


def rollout_engine(config: TrainConfig) -> RolloutEngine:
    """A rollout worker's engine: the run's model loaded in the worker, with the driver's torch threads."""
    import torch

    torch.set_num_threads(config.threads)
    model, _ = build_policy(config, lambda _: None)
    if config.policy.lora is not None:
        from posttrain.train.policy import wrap_lora

        wrap_lora(model, config.policy.lora, config.policy.seed)  # injects the adapters into `model` in place
    return build_rollout_engine(config.rollout, model, config.model)


def reward_grader(config: TrainConfig) -> Grader:
    """A reward worker's grader of the run's domains (its verifier processes and sandboxes on its host)."""
    return build_grader(TaskPool.from_config(config.domains), config.reward)


def _ray_backends(config: TrainConfig, model: Any) -> StageBackends:
    from posttrain.dist.cluster import ray_session
    from posttrain.dist.engine_pool import RayEnginePool
    from posttrain.dist.grader_pool import RayGraderPool
    from posttrain.dist.workers import WorkerOptions

    dist = config.dist
    stack = ExitStack()
    stack.enter_context(ray_session(dist))
    try:
        engine = RayEnginePool(
            functools.partial(rollout_engine, config), dist.rollout_workers,
            WorkerOptions(num_cpus=dist.worker_cpus, num_gpus=dist.rollout_worker_gpus),
            max_attempts=dist.max_attempts, autoscale=dist.autoscale,
        )  # fmt: skip
        stack.callback(engine.close)
        grader = RayGraderPool(
            functools.partial(reward_grader, config), dist.reward_workers, WorkerOptions(num_cpus=dist.worker_cpus),
            chunk_size=dist.reward_chunk_size, timeout_s=dist.reward_timeout_s, max_attempts=dist.max_attempts,
            autoscale=dist.autoscale,
        )  # fmt: skip
        stack.callback(grader.close)
        engine.workers.wait_ready(dist.startup_timeout_s)
        grader.workers.wait_ready(dist.startup_timeout_s)
        if config.policy.lora is None:  # start from this process's weights, even where nodes' files differ
            engine.update_weights(model.state_dict(), version=0)
    except BaseException:
        stack.close()
        raise
    return StageBackends(engine, grader, stack.close)


@dataclass
class Components:
    """What a run, an evaluation or a bench works with; close() stops the grader's workers."""

    pool: TaskPool
    grader: GradingBackend
    mixture: DomainMixture
    model: Any
    tokenizer: Any
    renderer: PromptRenderer
    engine: RolloutEngine
    untrained_ids: tuple[str, ...] = ()
    """Domains evaluated but never sampled for training (`domains.untrained`)."""
    close_backends: Callable[[], None] | None = None
    """Stops the engine and grader (and a Ray cluster the run started); None: `grader.close`."""

    @property
    def trained_ids(self) -> list[str]:
        return [d for d in self.pool.registry.ids() if d not in self.untrained_ids]

    @classmethod
    def build(cls, config: TrainConfig, log: Log) -> Components:
        pool = TaskPool.from_config(config.domains)
        untrained = config.domains.untrained_ids(pool.registry.ids())
        trained = [s for s in pool.registry.specs() if s.id not in untrained]
        if not trained:
            raise ConfigError("domains.untrained covers every domain: nothing is left to train on")
        mixture = build_mixture_for_specs(config.mixture, trained)
        model, tokenizer = build_policy(config, log)
        backends = build_stage_backends(config, pool, model)
        return cls(
            pool=pool,
            grader=backends.grader,
            mixture=mixture,
            model=model,
            tokenizer=tokenizer,
            renderer=PromptRenderer(tokenizer, config.rollout.system_prompt),
            engine=backends.engine,
            untrained_ids=tuple(untrained),
            close_backends=backends.close,
        )

    def close(self) -> None:
        if self.close_backends is not None:
            self.close_backends()
        else:
            self.grader.close()
