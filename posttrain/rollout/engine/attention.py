"""Which cached keys each query sees: exact causal attention, or an opt-in sparse approximation.

`AttentionConfig.kind`:
- `exact` (default): every earlier position, through an explicit bottom-right-aligned causal mask
  (query i of a chunk starting at position s sees keys 0..s+i), so cached and chunked computation
  equal a full forward.
- `window`: attention sinks plus a sliding window (StreamingLLM, Xiao et al. 2023): keys
  `[0, sink_tokens)` and the last `window_tokens` positions. Only those keys are gathered, so the cost
  per token no longer grows with the context.
- `quest`: query-aware page selection (Quest, Tang et al. 2024) for decode steps: each KV block is
  scored by the upper bound `sum_d max(q_d * min_k k_d, q_d * max_k k_d)` (summed over query heads),
  and only the `top_k_blocks` best blocks (always including the newest) are attended. The runner keeps
  every block's elementwise key min/max, refreshed only for blocks written since, so a decode step
  reads the bounds and the chosen blocks, not every key. Prefill is exact.
Sparse modes are lossy; `posttrain.rollout.engine.divergence` measures how far they drift.
"""

from __future__ import annotations

import torch

from posttrain.rollout.config import AttentionConfig


def key_positions(config: AttentionConfig, start: int, num_queries: int) -> torch.Tensor:
    """Positions `[S]` a chunk of queries at `start .. start+num_queries-1` may attend (before quest)."""
    end = start + num_queries
    if config.kind != "window":
        return torch.arange(end)
    first_window = max(0, start - config.window_tokens + 1)
    if first_window <= config.sink_tokens:
        return torch.arange(end)
    return torch.cat([torch.arange(config.sink_tokens), torch.arange(first_window, end)])


def chunk_mask(config: AttentionConfig, keys: torch.Tensor, start: int, num_queries: int) -> torch.Tensor:
    """Boolean `[Tq, S]`: query i (position start+i) may see key position keys[j]."""
    q_pos = torch.arange(start, start + num_queries)[:, None]  # [Tq, 1]
    k_pos = keys[None, :]  # [1, S]
    mask = k_pos <= q_pos
    if config.kind == "window":
        mask &= (k_pos < config.sink_tokens) | (k_pos > q_pos - config.window_tokens)
    return mask


def quest_select_from_bounds(
    q: torch.Tensor, kmin: torch.Tensor, kmax: torch.Tensor, valid_blocks: torch.Tensor, top_k: int
) -> torch.Tensor:
    """Indices `[B, k]` of the blocks to attend for decode queries, from per-block key bounds.

    q `[B, H, D]`; kmin, kmax `[B, NB, Hkv, D]` (elementwise min and max of each block's keys);
    valid_blocks `[B, NB]` bool. The newest valid block is always kept (its bounds are not needed).
    """
    b, h, d = q.shape
    hkv = kmin.shape[2]
    qg = q.view(b, hkv, h // hkv, d)  # [B, Hkv, G, D]
    hi = torch.maximum(qg[:, None] * kmax[:, :, :, None], qg[:, None] * kmin[:, :, :, None])  # [B, NB, Hkv, G, D]
    scores = hi.sum(dim=(2, 3, 4))  # [B, NB]
    scores = scores.masked_fill(~valid_blocks, float("-inf"))
    newest = valid_blocks.long().sum(-1) - 1  # [B]
    scores[torch.arange(b, device=scores.device), newest] = float("inf")
    k = min(top_k, kmin.shape[1])
    return torch.topk(scores, k, dim=-1).indices
