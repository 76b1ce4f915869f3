"""Forward passes that compute a prefix shared by every row of a batch once.

A GRPO group repeats one prompt G times and sibling questions on one document repeat the document; a
padded forward recomputes that prefix for every row, which dominates the cost of an update once prompts
are thousands of tokens long. `shared_prefix_forward` runs the common prefix as a single row with the KV
cache on, repeats that cache across the batch (a differentiable copy: the gradients of every row flow back
into the one prefix computation), then runs each row's remainder against it. The logits equal those of
the padded forward up to float rounding (tests/train/test_shared_prefix.py checks logits and gradients).
`micro_batches` orders rows so that rows sharing a long prompt prefix land in the same micro-batch.

Guarantees: only positions from `prefix_len` on get logits, so callers keep `prefix_len` at or before
the first position whose logits they need. Not here: the loss, or any choice of which prefix is worth
sharing beyond the `min_tokens` threshold.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn


def common_prefix_len(input_ids: Tensor, attention_mask: Tensor, limit: int) -> int:
    """Leading positions (at most `limit`) where every row holds the same real token. `[B, L]` inputs."""
    same = (input_ids == input_ids[:1]).all(0) & attention_mask.bool().all(0)  # [L]
    differs = (~same[:limit]).nonzero()
    return int(differs[0, 0]) if differs.numel() else min(limit, input_ids.shape[1])


def shared_prefix_forward(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor, prefix_len: int, logits_to_keep: int | None
) -> Tensor:
    """Logits `[B, K, V]` of the last K positions (K = `logits_to_keep`, else all from `prefix_len` on),
    computing the first `prefix_len` positions, identical in every row, once."""
    num_rows, length = input_ids.shape
    keep: dict[str, Any] = {"logits_to_keep": 1} if logits_to_keep is not None else {}
    prefix = model(input_ids=input_ids[:1, :prefix_len], use_cache=True, **keep)
    cache = prefix.get("cache", None) or prefix.past_key_values
    cache.batch_repeat_interleave(num_rows)  # [1, H, C, D] -> [B, H, C, D] per layer, autograd-tracked
    positions = torch.arange(prefix_len, length, device=input_ids.device).expand(num_rows, -1)  # [B, L - C]
    rest: dict[str, Any] = {"logits_to_keep": logits_to_keep} if logits_to_keep is not None else {}
    rest[_cache_argument(model)] = cache
    output = model(
        input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask, position_ids=positions, use_cache=True,
        **rest,
    )
    logits: Tensor = output.logits  # [B, K or L - C, V]
    return logits


def _cache_argument(model: nn.Module) -> str:
    """The forward's KV-cache argument: `cache` in recent `transformers`, `past_key_values` before (and
    still accepted there, with a deprecation warning); a PEFT wrapper forwards it to its base model."""
    get_base = getattr(model, "get_base_model", None)
    base = get_base() if callable(get_base) else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def micro_batches(prompt_ids: Sequence[Sequence[int]], rows: Sequence[int], size: int,
                  min_tokens: int | None) -> list[list[int]]:  # fmt: skip
    """`rows` cut into micro-batches of at most `size`; with `min_tokens`, rows whose prompts share their
    first `min_tokens` tokens are put together (in order of first appearance), the rest follow in order."""
    if min_tokens is None:
        ordered = [list(rows)]
    else:
        buckets: dict[tuple[int, ...], list[int]] = {}
        for row in rows:
            if len(prompt_ids[row]) > min_tokens:
                buckets.setdefault(tuple(prompt_ids[row][:min_tokens]), []).append(row)
        shared = [bucket for bucket in buckets.values() if len(bucket) > 1]
        grouped = {row for bucket in shared for row in bucket}
        ordered = [*shared, [row for row in rows if row not in grouped]]
    return [bucket[i : i + size] for bucket in ordered if bucket for i in range(0, len(bucket), size)]


def sft_loss_backward(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, labels: Tensor,
                      min_tokens: int) -> float:  # fmt: skip
    """Back-propagates the token-mean cross-entropy over labelled tokens (label -100: none) of a right-padded
    batch `[B, L]`, grouping rows whose prompts share `min_tokens` leading tokens and computing what they
    share once; returns the loss. Equals `model(..., labels=labels).loss` up to rounding."""
    labelled = labels != -100  # [B, L]
    num_labelled = int(labelled[:, 1:].sum())
    first_label = [int(row.nonzero()[0, 0]) if row.any() else int(row.numel()) for row in labelled]
    prompts = [input_ids[b, : first_label[b]].tolist() for b in range(input_ids.shape[0])]
    total = 0.0
    for rows in micro_batches(prompts, range(len(prompts)), len(prompts), min_tokens):
        ids, mask, targets = input_ids[rows], attention_mask[rows], labels[rows]
        limit = max(min(first_label[b] for b in rows) - 1, 0)
        shared = common_prefix_len(ids, mask, limit) if len(rows) > 1 else 0
        if shared >= min_tokens:
            logits = shared_prefix_forward(model, ids, mask, shared, None)  # [b, L - C, V]
        else:
            shared, logits = 0, model(input_ids=ids, attention_mask=mask).logits  # [b, L, V]
        shifted = targets[:, shared + 1 :]  # position p predicts token p + 1
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(), shifted.flatten(), ignore_index=-100, reduction="sum"
        ) / max(num_labelled, 1)
        loss.backward()
        total += float(loss.item())
    return total
