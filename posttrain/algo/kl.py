"""Per-token KL estimators, token log-probabilities and entropy from logits.

KL(pi || ref) is estimated from tokens sampled by pi with Schulman's approximations
(http://joschu.net/blog/kl-approx.html): with log r = log ref(x) - log pi(x),
k1 = -log r (unbiased, can be negative) and k3 = (r - 1) - log r (unbiased, always >= 0, lower
variance; the estimator GRPO uses). Guarantees: pure functions; the logits helpers work in float32 and
process the sequence in chunks so no float32 copy of the full `[B, T, V]` logits is made at once.
Not here: masking and aggregation over tokens (`posttrain.algo.losses`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from posttrain.algo.config import KLEstimator


def kl_k1(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """k1 = log pi - log ref, per token (any shape)."""
    return logprobs - ref_logprobs


def kl_k3(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """k3 = exp(log ref - log pi) - (log ref - log pi) - 1, per token (any shape)."""
    log_ratio = ref_logprobs - logprobs
    return torch.exp(log_ratio) - log_ratio - 1.0


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: KLEstimator) -> Tensor:
    """The per-token KL estimate named by `estimator`."""
    return kl_k1(logprobs, ref_logprobs) if estimator == "k1" else kl_k3(logprobs, ref_logprobs)


def token_logprobs(logits: Tensor, token_ids: Tensor, chunk_size: int = 128) -> Tensor:
    """log softmax(logits)[token]: `logits` `[B, T, V]`, `token_ids` `[B, T]` -> `[B, T]` float32."""
    pieces = []
    for start in range(0, logits.shape[1], chunk_size):
        chunk = logits[:, start : start + chunk_size].float()  # [B, c, V]
        ids = token_ids[:, start : start + chunk_size].unsqueeze(-1)  # [B, c, 1]
        picked = chunk.gather(-1, ids).squeeze(-1)  # [B, c]
        pieces.append(picked - torch.logsumexp(chunk, dim=-1))
    return torch.cat(pieces, dim=1) if pieces else logits.new_zeros(logits.shape[:2], dtype=torch.float32)


def entropy_from_logits(logits: Tensor, chunk_size: int = 128) -> Tensor:
    """Entropy of softmax(logits) per position: `[B, T, V]` -> `[B, T]` float32, in nats."""
    pieces = []
    for start in range(0, logits.shape[1], chunk_size):
        chunk = logits[:, start : start + chunk_size].float()  # [B, c, V]
        probs = F.softmax(chunk, dim=-1)
        pieces.append(torch.logsumexp(chunk, dim=-1) - (probs * chunk).sum(dim=-1))
    return torch.cat(pieces, dim=1) if pieces else logits.new_zeros(logits.shape[:2], dtype=torch.float32)
