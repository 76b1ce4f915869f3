"""Forward passes that compute a prefix shared by every row of a batch once.

A GRPO group repeats one prompt G times and sibling questions on one document repeat the document; a
padded forward recomputes that prefix for every row, which dominates the cost of an update once prompts
are thousands of tokens long. `shared_prefix_forward` runs the common prefix as a single row with the KV
cache on, then runs each row's remainder against it; the gradients of every row flow back into the one
prefix computation. For the plain decoder families (`CASCADE_MODEL_TYPES`) the rows' attention is a
cascade: all rows' queries against the one prefix KV in a single product per KV head, plus each row's
causal attention over its own tokens, in one softmax; nothing is copied per row. Other models get the
prefix cache repeated across the batch (a differentiable copy; for a 2K-token document and 16 rows that
copy and its gradient cost more than the rows). The logits equal those of the padded forward up to float
rounding (tests/train/test_shared_prefix.py checks logits and gradients of both paths).
`micro_batches` orders rows so that rows sharing a long prompt prefix land in the same micro-batch.

Guarantees: only positions from `prefix_len` on get logits, so callers keep `prefix_len` at or before
the first position whose logits they need. Not here: the loss, or any choice of which prefix is worth
sharing beyond the `min_tokens` threshold.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.utils.checkpoint
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
    positions = torch.arange(prefix_len, length, device=input_ids.device).expand(num_rows, -1)  # [B, L - C]
    rest: dict[str, Any] = {"logits_to_keep": logits_to_keep} if logits_to_keep is not None else {}
    if cascades(model):  # right padding: a real query never sees a padded key, so no mask is needed
        rest["prefix_kv"] = [(layer.keys, layer.values) for layer in cache.layers]  # [1, Hkv, C, D] each
        with _attention_implementation(model, CASCADE):
            output = model(input_ids=input_ids[:, prefix_len:], position_ids=positions, use_cache=False, **rest)
    else:
        cache.batch_repeat_interleave(num_rows)  # [1, H, C, D] -> [B, H, C, D] per layer, autograd-tracked
        rest[_cache_argument(model)] = cache
        output = model(input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask, position_ids=positions,
                       use_cache=True, **rest)  # fmt: skip
    logits: Tensor = output.logits  # [B, K or L - C, V]
    return logits


CASCADE = "posttrain_shared_prefix"
"""The attention implementation name the cascade is registered under with `transformers`."""
CASCADE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3"})
"""Model types whose attention is plain scaled dot-product over rotated keys (no sliding window, soft
capping or sinks), so the cascade computes exactly what their own attention does."""


def cascades(model: nn.Module) -> bool:
    """Whether `shared_prefix_forward` uses the cascade for `model`."""
    config = getattr(model, "config", None)
    return (getattr(config, "model_type", None) in CASCADE_MODEL_TYPES
            and not getattr(config, "use_sliding_window", False))  # fmt: skip


def cascade_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                      scaling: float, dropout: float = 0.0, prefix_kv: Any = None,
                      **kwargs: Any) -> tuple[Tensor, None]:  # fmt: skip
    """Rows' attention over a prefix shared by all of them plus their own causal keys. `query`
    `[B, H, Q, D]`, `key`/`value` `[B, Hkv, Q, D]` (the rows' own, rotated), `prefix_kv[layer]` the
    prefix's `[1, Hkv, C, D]`; returns `[B, Q, H, D]` as `transformers` attention functions do."""
    if prefix_kv is None:  # a forward without a shared prefix: the model's usual attention
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,  # type: ignore[no-any-return]
                                      scaling=scaling, **kwargs)  # fmt: skip
    if dropout:
        raise ValueError("the shared-prefix cascade does not apply attention dropout")
    prefix_key, prefix_value = prefix_kv[module.layer_idx]  # type: ignore[index]
    inputs = (query, key, value, prefix_key, prefix_value)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        # the weights over the prefix are [rows x heads x Q x C]: ~10 MB per layer for one row of 150
        # tokens on a 2K-token document; recomputed in the backward pass instead of kept
        out = torch.utils.checkpoint.checkpoint(_cascade, *inputs, scaling, use_reentrant=False)
    else:
        out = _cascade(*inputs, scaling)
    return out, None


def _cascade(query: Tensor, key: Tensor, value: Tensor, prefix_key: Tensor, prefix_value: Tensor,
             scaling: float) -> Tensor:  # fmt: skip
    rows, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    # every row's queries of one KV head in one matrix: [Hkv, B*G*Q, D] against the prefix's [Hkv, C, D]
    flat = query.reshape(rows, kv_heads, group, length, dim).transpose(0, 1).reshape(kv_heads, -1, dim)
    on_prefix = torch.matmul(flat, prefix_key[0].transpose(1, 2)) * scaling  # [Hkv, N, C]
    own = query.reshape(rows, kv_heads, group * length, dim)
    on_own = torch.matmul(own, key.transpose(2, 3)) * scaling  # [B, Hkv, G*Q, Q]
    future = torch.ones(length, length, dtype=torch.bool, device=query.device).triu(1).repeat(group, 1)
    on_own = on_own.masked_fill(future, float("-inf"))
    # one softmax over both parts, shifted by the row maximum (a constant: its gradient cancels)
    own_max = on_own.amax(-1).transpose(0, 1).reshape(kv_heads, -1)  # [Hkv, N]
    shift = torch.maximum(on_prefix.amax(-1), own_max).detach()
    wide = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    prefix_weights = torch.exp((on_prefix - shift[..., None]).to(wide))  # [Hkv, N, C]
    own_shift = shift.view(kv_heads, rows, group * length).transpose(0, 1)[..., None]  # [B, Hkv, G*Q, 1]
    own_weights = torch.exp((on_own - own_shift).to(wide))  # [B, Hkv, G*Q, Q]
    total = prefix_weights.sum(-1) + own_weights.sum(-1).transpose(0, 1).reshape(kv_heads, -1)  # [Hkv, N]
    out = torch.matmul(prefix_weights.to(query.dtype), prefix_value[0])  # [Hkv, N, D]
    out = out + torch.matmul(own_weights.to(query.dtype), value).transpose(0, 1).reshape(kv_heads, -1, dim)
    out = out / total[..., None].to(query.dtype)
    # [Hkv, B, G, Q, D] -> [B, Q, Hkv * G, D]
    return out.view(kv_heads, rows, group, length, dim).permute(1, 3, 0, 2, 4).reshape(rows, length, heads, dim)


@contextmanager
def _attention_implementation(model: nn.Module, name: str) -> Iterator[None]:
    """`model` (and every module sharing its config) attends with `name` inside the block."""
    from transformers import AttentionInterface

    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, cascade_attention)
    config: Any = model.config
    previous = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = previous


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
