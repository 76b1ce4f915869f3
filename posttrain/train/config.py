"""The training run's config: one frozen model per stage, composed into `TrainConfig`.

Presets live in `configs/*.yaml`; `posttrain train CONFIG --set a.b=c` validates overrides with the
same models. Each stage receives only its own section, never the whole config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from posttrain.config import StrictModel, load_config
from posttrain.curriculum import DefaultMixtureConfig, DynamicSamplingConfig, MixtureConfig
from posttrain.tasks.registry import DomainsConfig, resolve_paths
from posttrain.train.base_model import TinyBaseConfig
from posttrain.train.models import ModelConfig
from posttrain.train.policy import PolicyConfig


class RolloutConfig(StrictModel):
    """How samples are generated."""

    backend: Literal["native", "hf"] = "native"
    """native: paged-KV engine with prefix reuse; hf: plain transformers generate (baseline/fallback)."""
    group_size: int = Field(8, ge=2)
    """Samples per task (the GRPO group)."""
    max_new_tokens: int = Field(32, ge=1)
    """Generation budget per sample."""
    temperature: float = Field(1.0, gt=0.0)
    """Sampling temperature during training."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus mass."""
    top_k: int = Field(0, ge=0)
    """Top-k cut-off; 0 disables it."""
    system_prompt: str | None = None
    """Optional system message for chat models."""


class RewardConfig(StrictModel):
    """How samples are graded."""

    mode: Literal["verifier", "random"] = "verifier"
    """verifier: the domains' verifiers; random: a coin flip per sample (control run, no signal)."""
    workers: int = Field(2, ge=0)
    """Verifier worker processes (0: in-process, main thread)."""
    infra_retries: int = Field(2, ge=0)
    """Re-grading attempts for infra failures before a sample is dropped from the update."""


class AdvantageConfig(StrictModel):
    """Group-relative advantages."""

    normalize_std: bool = True
    """Divide by the group's reward std (GRPO); false gives Dr. GRPO's mean-centred advantages."""


class EvalConfig(StrictModel):
    """Held-out evaluation."""

    tasks_per_domain: int = Field(32, ge=1)
    """Fixed eval-split tasks per domain."""
    every_steps: int = Field(0, ge=0)
    """Evaluate every N steps (0: only before and after training)."""
    max_new_tokens: int = Field(32, ge=1)
    """Greedy generation budget."""


class TrainConfig(StrictModel):
    """A whole RL run."""

    seed: int = 0
    """Seed for task sampling, generation and the mixture's draws."""
    steps: int = Field(30, ge=0)
    """Policy updates."""
    tasks_per_step: int = Field(16, ge=1)
    """Tasks per step before filtering (each yields group_size samples)."""
    threads: int = Field(2, ge=1)
    """torch CPU threads."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The base policy."""
    tiny_base: TinyBaseConfig = Field(default_factory=TinyBaseConfig)
    """Recipe of the embedded tiny base model (used when model.preset is 'tiny')."""
    domains: DomainsConfig = Field(default_factory=DomainsConfig)
    """The domains to train on."""
    mixture: MixtureConfig = Field(default_factory=DefaultMixtureConfig)
    """Per-domain sampling weights."""
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    """Generation."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """Grading."""
    filter: DynamicSamplingConfig = Field(default_factory=DynamicSamplingConfig)
    """Dynamic sampling: drop groups whose rewards are all equal, refill within a budget."""
    domain_loss: Literal["domain_token_mean", "domain_sequence_mean", "none"] = "domain_token_mean"
    """Aggregate the loss per domain first so a domain's gradient share is its sample share, not its
    token share (tasks are already sampled by domain weight, so weights are not applied again);
    none keeps the policy loss's own aggregation."""
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    """Advantage estimation."""
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    """The policy update (optimiser, loss, LoRA)."""
    eval: EvalConfig = Field(default_factory=EvalConfig)
    """Held-out evaluation."""
    checkpoint_every: int = Field(0, ge=0)
    """Save a checkpoint every N steps (0: only at the end)."""

    @model_validator(mode="before")
    @classmethod
    def _one_temperature(cls, data: Any) -> Any:
        """The update scores responses at the sampling temperature: `policy.temperature` follows
        `rollout.temperature` unless set, and may not contradict it."""
        if not isinstance(data, dict):
            return data
        rollout, policy = data.get("rollout") or {}, data.get("policy") or {}
        if not isinstance(rollout, dict) or not isinstance(policy, dict) or "temperature" not in rollout:
            return data
        if "temperature" in policy and float(policy["temperature"]) != float(rollout["temperature"]):
            raise ValueError("policy.temperature must equal rollout.temperature (leave it unset to follow it)")
        return {**data, "policy": {**policy, "temperature": rollout["temperature"]}}


def load_train_config(path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
    """Load a preset or file; JSONL paths in its domains resolve against the file's folder."""
    config = load_config(TrainConfig, path, overrides or [])
    if path is None:
        return config
    domains = resolve_paths(config.domains, Path(path).resolve().parent)
    return config.model_copy(update={"domains": domains})
