"""Configuration of the policy update: optimizer, LR schedule, batching, LoRA and the loss.

Pure data plus the LR schedule as a function of the optimizer step; `posttrain.train.policy` uses
them (and re-exports them). Not here: anything that touches a model.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from posttrain.algo import LossConfig
from posttrain.config import StrictModel


class LoraConfig(StrictModel):
    """LoRA adapters (Hu et al. 2021) trained instead of the full weights."""

    r: int = Field(16, gt=0)
    """Adapter rank."""
    alpha: int = Field(32, gt=0)
    """Scaling numerator: the update is scaled by alpha / r."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout on the adapter input (0 keeps old and new log-probabilities comparable)."""
    target_modules: str | tuple[str, ...] = "all-linear"
    """Module names to adapt, or peft's "all-linear" (every linear layer but the output head)."""


class PolicyConfig(StrictModel):
    """Optimisation of the policy: optimizer, schedule, batching, adapters and the loss."""

    lr: float = Field(1e-5, gt=0)
    """Peak learning rate of AdamW."""
    weight_decay: float = Field(0.0, ge=0)
    """Decoupled weight decay of AdamW."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW moment decay rates."""
    adam_eps: float = Field(1e-8, gt=0)
    """AdamW denominator epsilon."""
    max_grad_norm: float | None = Field(1.0, gt=0)
    """Clip the global gradient norm to this; None only measures it."""
    micro_batch_size: int = Field(8, gt=0)
    """Samples per forward/backward pass (memory knob; does not change results)."""
    mini_batches: int = Field(1, gt=0)
    """Optimizer steps per epoch; the batch is split into this many consecutive parts."""
    shared_prefix_min_tokens: int | None = Field(64, ge=1)
    """Rows of a micro-batch whose prompts share at least this many leading tokens (a GRPO group, sibling
    questions on one document) are batched together and compute that prefix once; None: never. At 64, a
    group of 8 SmolLM2-135M samples (128 prompt + 60-128 response tokens, LoRA) updates 1.7x faster than
    the padded forward (docs/pipeline.md)."""
    epochs: int = Field(1, gt=0)
    """Optimisation passes over each batch (PPO epochs) against the same old log-probabilities."""
    warmup_steps: int = Field(0, ge=0)
    """Optimizer steps of linear LR warmup from lr / warmup_steps to lr."""
    lr_schedule: Literal["constant", "cosine"] = "constant"
    """LR after warmup: constant, or cosine decay to min_lr_ratio * lr at decay_steps."""
    decay_steps: int = Field(1000, gt=0)
    """Optimizer step (counting warmup) at which the cosine schedule reaches its floor."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Floor of the cosine schedule as a fraction of lr."""
    lora: LoraConfig | None = None
    """Train LoRA adapters instead of all weights; None trains everything."""
    loss: LossConfig = LossConfig()
    """The policy loss."""
    autocast: bool = True
    """Use bf16 autocast when the model is on CUDA (never on CPU)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    temperature: float = Field(1.0, gt=0)
    """Rollout sampling temperature: logits are divided by it so new and old log-probabilities agree."""
    logits_chunk_size: int = Field(128, gt=0)
    """Positions per chunk when turning logits into log-probabilities and entropy."""
    seed: int = 0
    """Seeds adapter initialisation (the global RNG is left alone)."""
    track_kl_to_base: bool = False
    """Report the sampling policy's KL to the base model (k3, per domain) every step even when
    `loss.kl_beta` is 0: one more no-grad forward per batch, and a frozen copy of the model unless LoRA."""


def lr_multiplier(step: int, config: PolicyConfig) -> float:
    """LR factor for optimizer step `step` (0-based): linear warmup, then constant or cosine."""
    if config.lr_schedule == "constant":
        return min(1.0, (step + 1) / config.warmup_steps) if config.warmup_steps else 1.0
    return warmup_cosine(step, config.warmup_steps, config.decay_steps, config.min_lr_ratio)


def warmup_cosine(step: int, warmup_steps: int, decay_steps: int, min_ratio: float) -> float:
    """Linear warmup over `warmup_steps`, then cosine decay to `min_ratio` at `decay_steps` (0-based step)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min((step - warmup_steps) / max(decay_steps - warmup_steps, 1), 1.0)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
