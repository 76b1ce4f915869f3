"""How far a sparse attention mode drifts from exact attention on the same tokens.

Both engines are teacher-forced through the same continuation one decode step at a time, so every
position is compared on identical inputs. Reported: mean and max KL(exact || sparse) of the next-token
distributions, mean and max absolute difference of the continuation tokens' logprobs, and the share
of positions where both argmaxes agree. Sparse modes are opt-in and lossy; these figures are the
price to check before turning one on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from posttrain.rollout.config import AttentionConfig, NativeEngineConfig
from posttrain.rollout.engine.engine import NativeEngine


def divergence_from_logits(exact: torch.Tensor, sparse: torch.Tensor,
                           continuation_ids: Sequence[int]) -> dict[str, float]:
    """Compare logits `[T, V]` of the same positions."""
    log_p = torch.log_softmax(exact.float(), -1)
    log_q = torch.log_softmax(sparse.float(), -1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)  # [T]
    idx = torch.tensor(list(continuation_ids), device=exact.device)[:, None]
    drift = (log_p.gather(-1, idx) - log_q.gather(-1, idx)).abs()[:, 0]  # [T]
    agree = (exact.argmax(-1) == sparse.argmax(-1)).float()
    return {"kl_mean": kl.mean().item(), "kl_max": kl.max().item(), "logprob_drift_mean": drift.mean().item(),
            "logprob_drift_max": drift.max().item(), "argmax_agreement": agree.mean().item()}


def measure_divergence(model: Any, prompt_ids: Sequence[int], continuation_ids: Sequence[int],
                       attention: AttentionConfig, base: NativeEngineConfig | None = None) -> dict[str, float]:
    """Teacher-force `continuation_ids` after `prompt_ids` with exact and with `attention`; compare."""
    base = base or NativeEngineConfig()
    exact_cfg = base.model_copy(update={"attention": AttentionConfig(), "prefix_caching": False})
    sparse_cfg = base.model_copy(update={"attention": attention, "prefix_caching": False})
    exact = NativeEngine(model, exact_cfg).teacher_forced_logits(prompt_ids, continuation_ids)
    sparse = NativeEngine(model, sparse_cfg).teacher_forced_logits(prompt_ids, continuation_ids)
    return divergence_from_logits(exact, sparse, continuation_ids)
