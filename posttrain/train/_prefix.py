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
rounding (tests/train/test_shared_prefix.py checks logits and gradients of both paths). When rows
also repeat what follows the shared prefix (a question asked by the G samples of a group),
`grouped_prefix_forward` adds a level: the document once, each group's question once against it, and
each row from its prompt's last token, attending to all three in one softmax.
`micro_batches` orders rows so that rows sharing a long prompt prefix land in the same micro-batch.

Guarantees: only positions from `prefix_len` on get logits, so callers keep `prefix_len` at or before
the first position whose logits they need. Not here: the loss, or any choice of which prefix is worth
sharing beyond the `min_tokens` threshold.
"""

from __future__ import annotations

import inspect
import sys
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
    positions = torch.arange(prefix_len, length, device=input_ids.device).expand(num_rows, -1)  # [B, L - C]
    rest: dict[str, Any] = {"logits_to_keep": logits_to_keep} if logits_to_keep is not None else {}
    if cascades(model):  # right padding: a real query never sees a padded key, so no mask is needed
        # the prefix KV goes in as an argument, not as a cache: the rows' layers may be checkpointed
        rest["prefix_kv"] = _prefix_kv(model, input_ids, prefix_len)
        output = model(input_ids=input_ids[:, prefix_len:], position_ids=positions, use_cache=False, **rest)
    else:
        cache = _prefix_cache(model, input_ids, prefix_len, keep_logits=logits_to_keep is not None)
        cache.batch_repeat_interleave(num_rows)  # [1, H, C, D] -> [B, H, C, D] per layer, autograd-tracked
        rest[_cache_argument(model)] = cache
        with _checkpointing_off(model):  # a checkpointed layer would drop the cache
            output = model(input_ids=input_ids[:, prefix_len:], attention_mask=attention_mask,
                           position_ids=positions, use_cache=True, **rest)  # fmt: skip
    logits: Tensor = output.logits  # [B, K or L - C, V]
    return logits


def _prefix_cache(model: nn.Module, input_ids: Tensor, prefix_len: int, keep_logits: bool) -> Any:
    """The KV cache of the first row's first `prefix_len` tokens, differentiable; `keep_logits`: the
    model takes `logits_to_keep` (only one position's logits are computed). For models without the
    cascade: all of the prefix's activations are kept until the backward pass."""
    keep: dict[str, Any] = {"logits_to_keep": 1} if keep_logits else {}
    with _checkpointing_off(model):  # a checkpointed `transformers` layer would not fill the cache
        prefix = model(input_ids=input_ids[:1, :prefix_len], use_cache=True, **keep)
    return prefix.get("cache", None) or prefix.past_key_values


def _prefix_kv(model: nn.Module, input_ids: Tensor, prefix_len: int) -> list[tuple[Tensor, Tensor]]:
    """Each layer's keys and values `[1, Hkv, C, D]` of the first row's first `prefix_len` tokens,
    differentiable, collected by the cascade (cascade models). Without a cache the layers stay
    checkpointed when the model is: a checkpointed layer keeps only its input and the keys and values it
    handed out, and recomputes the rest in the backward pass. One micro-batch of 16 rows of 160 tokens
    after a 7,600-token document, SmolLM2-135M, full fine-tuning: peak RSS 8.4 GB, against 15.9 GB with
    every activation of the document kept (same loss and gradients)."""
    _install_cascade(model)
    collected: dict[int, tuple[Tensor, Tensor]] = {}
    model(input_ids=input_ids[:1, :prefix_len], use_cache=False, logits_to_keep=1, collect_kv=collected)
    return [collected[layer] for layer in range(len(collected))]


def group_starts(input_ids: Tensor, prefix_len: int, starts: Sequence[int]) -> list[int] | None:
    """`starts` (each row's first position whose logits are needed) when some rows repeat the same
    tokens from `prefix_len` to their start (the samples of a GRPO group after their document), so that
    `grouped_prefix_forward` computes each group's part once; None when no two rows share one."""
    if max(starts) <= prefix_len:
        return None
    parts = {tuple(input_ids[row, prefix_len:start].tolist()) for row, start in enumerate(starts)}
    return list(starts) if len(parts) < len(starts) else None


def grouped_prefix_forward(model: nn.Module, input_ids: Tensor, attention_mask: Tensor, prefix_len: int,
                           starts: Sequence[int], first_kept: int) -> Tensor:  # fmt: skip
    """Logits `[B, L - first_kept, V]` of a right-padded batch `[B, L]` whose rows share their first
    `prefix_len` tokens (a document), and whose tokens from there to `starts[row]` repeat across the rows
    of a group (a question asked G times): the document runs once, each group's part once against it,
    and each row only from its start, attending to all three through the cascade. Columns before a
    row's start hold no logits of that row (they repeat its first). Cascade models only (`cascades`)."""
    num_rows = input_ids.shape[0]
    device = input_ids.device
    prefix_kv = _prefix_kv(model, input_ids, prefix_len)  # [1, Hkv, C, D] each
    # each group's part: one row per group, right-padded, against the prefix; its keys/values collected
    groups: dict[tuple[int, ...], int] = {}
    group_of = [groups.setdefault(tuple(input_ids[row, prefix_len:start].tolist()), len(groups))
                for row, start in enumerate(starts)]  # fmt: skip
    widths = [len(part) for part in groups]
    width = max(widths)
    part_ids = torch.zeros(len(groups), width, dtype=input_ids.dtype, device=device)
    for index, part in enumerate(groups):
        part_ids[index, : len(part)] = torch.tensor(part, dtype=input_ids.dtype)
    positions = torch.arange(prefix_len, prefix_len + width, device=device).expand(len(groups), -1)
    collected: dict[int, tuple[Tensor, Tensor]] = {}
    model(input_ids=part_ids, position_ids=positions, use_cache=False, logits_to_keep=1, prefix_kv=prefix_kv,
          collect_kv=collected)  # fmt: skip
    row_group = torch.tensor(group_of, device=device)
    group_kv = [(collected[layer][0].index_select(0, row_group), collected[layer][1].index_select(0, row_group))
                for layer in range(len(prefix_kv))]  # [B, Hkv, M, D] each  # fmt: skip
    group_valid = torch.arange(width, device=device) < torch.tensor([widths[g] for g in group_of], device=device)[:, None]
    # each row from its start
    lengths = attention_mask.sum(1).tolist()
    own = max(int(lengths[row]) - start for row, start in enumerate(starts))
    row_ids = torch.zeros(num_rows, own, dtype=input_ids.dtype, device=device)
    for row, start in enumerate(starts):
        row_ids[row, : int(lengths[row]) - start] = input_ids[row, start : int(lengths[row])]
    begin = torch.tensor(list(starts), device=device)[:, None]  # [B, 1]
    output = model(input_ids=row_ids, position_ids=begin + torch.arange(own, device=device), use_cache=False,
                   prefix_kv=prefix_kv, group_kv=group_kv, group_valid=group_valid)  # fmt: skip
    logits: Tensor = output.logits  # [B, own, V]
    # into the kept layout: column k is position first_kept + k
    column = (first_kept + torch.arange(input_ids.shape[1] - first_kept, device=device))[None] - begin
    column = column.clamp(0, own - 1)  # [B, K]
    return logits.gather(1, column[..., None].expand(-1, -1, logits.shape[-1]))


CASCADE = "posttrain_shared_prefix"
"""Prefix of the names the cascade is registered under with `transformers` (`<CASCADE>:<inner attention>`)."""
CASCADE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3"})
"""Model types whose attention is plain scaled dot-product over rotated keys (no sliding window, soft
capping or sinks), so the cascade computes exactly what their own attention does."""


def cascades(model: nn.Module) -> bool:
    """Whether `shared_prefix_forward` uses the cascade for `model`."""
    config = getattr(model, "config", None)
    return (getattr(config, "model_type", None) in CASCADE_MODEL_TYPES
            and not getattr(config, "use_sliding_window", False))  # fmt: skip


def cascade_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                      scaling: float, dropout: float = 0.0, prefix_kv: Any = None, group_kv: Any = None,
                      group_valid: Tensor | None = None, collect_kv: dict[int, tuple[Tensor, Tensor]] | None = None,
                      **kwargs: Any) -> tuple[Tensor, None]:  # fmt: skip
    """Rows' attention over a prefix shared by all of them, then (optionally) a middle part shared by
    their group, then their own causal keys. `query` `[B, H, Q, D]`, `key`/`value` `[B, Hkv, Q, D]` (the
    rows' own, rotated), `prefix_kv[layer]` the prefix's `[1, Hkv, C, D]`, `group_kv[layer]` each row's
    group part `[B, Hkv, M, D]` with `group_valid` `[B, M]` marking its real keys; `collect_kv` receives
    this layer's own keys and values. Returns `[B, Q, H, D]` as `transformers` attention functions do."""
    if collect_kv is not None:
        collect_kv[module.layer_idx] = (key, value)  # type: ignore[index]
    if prefix_kv is None:  # a forward without a shared prefix: the attention the model had before
        inner = _inner_attention(module)
        return inner(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)  # type: ignore[no-any-return]
    if dropout:
        raise ValueError("the shared-prefix cascade does not apply attention dropout")
    prefix_key, prefix_value = prefix_kv[module.layer_idx]  # type: ignore[index]
    group_key, group_value = group_kv[module.layer_idx] if group_kv is not None else (None, None)  # type: ignore[index]
    inputs = (query, key, value, prefix_key, prefix_value, group_key, group_value)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
        # the weights over the prefix are [rows x heads x Q x C]: ~10 MB per layer for one row of 150
        # tokens on a 2K-token document; recomputed in the backward pass instead of kept
        out = torch.utils.checkpoint.checkpoint(_cascade, *inputs, group_valid, scaling, use_reentrant=False)
    else:
        out = _cascade(*inputs, group_valid, scaling)
    return out, None


def _cascade(query: Tensor, key: Tensor, value: Tensor, prefix_key: Tensor, prefix_value: Tensor,
             group_key: Tensor | None, group_value: Tensor | None, group_valid: Tensor | None,
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
    row_max = on_own.amax(-1)  # [B, Hkv, G*Q]
    on_group = None
    if group_key is not None and group_value is not None and group_valid is not None:
        on_group = torch.matmul(own, group_key.transpose(2, 3)) * scaling  # [B, Hkv, G*Q, M]
        on_group = on_group.masked_fill(~group_valid[:, None, None, :], float("-inf"))
        row_max = torch.maximum(row_max, on_group.amax(-1))
    # one softmax over all parts, shifted by the row maximum (a constant: its gradient cancels)
    shift = torch.maximum(on_prefix.amax(-1), row_max.transpose(0, 1).reshape(kv_heads, -1)).detach()  # [Hkv, N]
    wide = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    prefix_weights = torch.exp((on_prefix - shift[..., None]).to(wide))  # [Hkv, N, C]
    row_shift = shift.view(kv_heads, rows, group * length).transpose(0, 1)[..., None]  # [B, Hkv, G*Q, 1]
    own_weights = torch.exp((on_own - row_shift).to(wide))  # [B, Hkv, G*Q, Q]
    row_total = own_weights.sum(-1)
    row_out = torch.matmul(own_weights.to(query.dtype), value)  # [B, Hkv, G*Q, D]
    if on_group is not None and group_value is not None:
        group_weights = torch.exp((on_group - row_shift).to(wide))  # [B, Hkv, G*Q, M]
        row_total = row_total + group_weights.sum(-1)
        row_out = row_out + torch.matmul(group_weights.to(query.dtype), group_value)
    total = prefix_weights.sum(-1) + row_total.transpose(0, 1).reshape(kv_heads, -1)  # [Hkv, N]
    out = torch.matmul(prefix_weights.to(query.dtype), prefix_value[0])  # [Hkv, N, D]
    out = out + row_out.transpose(0, 1).reshape(kv_heads, -1, dim)
    out = out / total[..., None].to(query.dtype)
    # [Hkv, B, G, Q, D] -> [B, Q, Hkv * G, D]
    return out.view(kv_heads, rows, group, length, dim).permute(1, 3, 0, 2, 4).reshape(rows, length, heads, dim)


def _install_cascade(model: nn.Module) -> None:
    """`model` (and every module sharing its config) attends with the cascade from now on. Without
    `prefix_kv` the cascade is the attention the model had (registered as `<CASCADE>:<its name>`, with
    that attention's mask function), so every other forward computes what it did before; it stays
    installed so that a checkpointed layer recomputed in the backward pass, after `shared_prefix_forward`
    has returned, runs the same attention. `transformers` does not save the name with the config."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    config: Any = model.config
    inner = config._attn_implementation or "eager"
    if inner.startswith(CASCADE):
        return
    name = f"{CASCADE}:{inner}"
    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, cascade_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[inner])
    config._attn_implementation = name


def _inner_attention(module: nn.Module) -> Any:
    """The attention function `module` used before the cascade was installed."""
    from transformers import AttentionInterface

    inner = module.config._attn_implementation.removeprefix(f"{CASCADE}:")  # type: ignore[union-attr, operator]
    if inner == "eager":  # each model's own eager function, not in the registry
        return sys.modules[type(module).__module__].eager_attention_forward  # type: ignore[attr-defined]
    return AttentionInterface._global_mapping[inner]


@contextmanager
def _checkpointing_off(model: nn.Module) -> Iterator[None]:
    """Gradient checkpointing (`gradient_checkpointing_enable`) off inside the block: a checkpointed
    `transformers` layer runs without its KV cache."""
    layers: list[Any] = [module for module in model.modules() if getattr(module, "gradient_checkpointing", False) is True]
    for layer in layers:
        layer.gradient_checkpointing = False
    try:
        yield
    finally:
        for layer in layers:
            layer.gradient_checkpointing = True


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
