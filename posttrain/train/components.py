"""The composition root: every live component of a run is built from config here, and only here.

`Components.build(config)` gives the task pool (registry inside), the grader, the domain mixture, the
model and tokenizer, the prompt renderer and the rollout engine; `build_learner` adds the policy
trainer. Training (`Run`), evaluation (`posttrain eval`), the base-model build and the benches all
call these functions, so each component is wired one way. The engine starts out sharing the policy
module (weight sync then copies nothing); every component takes its own config section only.
Not here: the loop, checkpoints, outputs (`posttrain.train.run`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from posttrain.curriculum import DomainMixture, build_mixture_for_specs
from posttrain.errors import ConfigError
from posttrain.rollout import PromptRenderer, RolloutEngine, build_engine
from posttrain.tasks.pool import TaskPool
from posttrain.train.config import ModelConfig, RewardConfig, RolloutConfig, TrainConfig
from posttrain.verify import ExecutorConfig, Grader

Log = Callable[[str], None]


def build_grader(pool: TaskPool, config: RewardConfig) -> Grader:
    """The grader of the pool's domains: verifier workers, or inline when `workers` is 0."""
    return pool.registry.grader(ExecutorConfig(num_workers=config.workers))


def build_policy(config: TrainConfig, log: Log) -> tuple[Any, Any]:
    """(model, tokenizer) of `config.model`; the tiny preset is built (or reused) for `config.domains`."""
    from posttrain.train.base_model import resolve_model

    return resolve_model(config.model, config.tiny_base, config.domains, log)


def build_rollout_engine(config: RolloutConfig, model: Any, model_config: ModelConfig) -> RolloutEngine:
    """The configured engine over the live policy module (vLLM loads the model's directory instead)."""
    return build_engine(config.engine, model, model_path=model_config.path)


def build_learner(model: Any, config: TrainConfig) -> Any:
    """The policy trainer over `model` (LoRA adapters are injected in place, so an engine sharing the
    module sees them)."""
    from posttrain.train.policy import PolicyTrainer

    return PolicyTrainer(model, config.policy)


@dataclass
class Components:
    """What a run, an evaluation or a bench works with; close() stops the grader's workers."""

    pool: TaskPool
    grader: Grader
    mixture: DomainMixture
    model: Any
    tokenizer: Any
    renderer: PromptRenderer
    engine: RolloutEngine
    untrained_ids: tuple[str, ...] = ()
    """Domains evaluated but never sampled for training (`domains.untrained`)."""

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
        model, tokenizer = build_policy(config, log)
        return cls(
            pool=pool,
            grader=build_grader(pool, config.reward),
            mixture=build_mixture_for_specs(config.mixture, trained),
            model=model,
            tokenizer=tokenizer,
            renderer=PromptRenderer(tokenizer, config.rollout.system_prompt),
            engine=build_rollout_engine(config.rollout, model, config.model),
            untrained_ids=tuple(untrained),
        )

    def close(self) -> None:
        self.grader.close()
