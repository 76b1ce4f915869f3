"""Token sampling from one row of logits: temperature, top-k, top-p, per-sample seeded generators.

Guarantees: a sample's draws depend only on its own logits and its own `torch.Generator`, never on
which other sequences share the batch, so results do not change with scheduling. Greedy (temperature
0) is an argmax with ties going to the lowest token id, like `transformers`. The returned logprob
follows `SamplingParams.logprobs_mode` (see `posttrain.rollout.api`).
"""

from __future__ import annotations

import torch

from posttrain.rollout.api import SamplingParams


def make_generator(params: SamplingParams, sample_index: int, device: torch.device) -> torch.Generator:
    """Sample j of a request draws from its own generator seeded with seed + j."""
    seed = params.seed
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + sample_index)
    return gen


def processed_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus) masking of raw logits `[V]` (float32)."""
    scaled = logits / params.temperature
    if params.top_k and params.top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, params.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if params.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        # drop a token when the mass before it already reaches top_p (keeps at least one token)
        drop_sorted = (cum - torch.softmax(sorted_logits, dim=-1)) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled


def sample_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[int, float]:
    """Pick the next token from raw logits `[V]`; returns (token id, logprob)."""
    raw = logits.float()
    if params.temperature == 0.0:
        token = int(torch.argmax(raw).item())
        return token, float(torch.log_softmax(raw, dim=-1)[token].item())
    final = processed_logits(raw, params)
    probs = torch.softmax(final, dim=-1)
    token = int(torch.multinomial(probs, 1, generator=generator).item())
    source = raw if params.logprobs_mode == "raw" else final
    return token, float(torch.log_softmax(source, dim=-1)[token].item())
