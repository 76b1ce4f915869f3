"""Staged prefixes attended in batches: which prefixes share a kernel call, and that call.

A decode stage's rows each attend a staged prefix apart from their own positions (cascade
attention, `decode_stage`). Calling the attention kernel once per prefix and layer costs one call's
overhead per GRPO group, which dominated short prefixes (a 200-token prompt's group). So prefixes of
one length whose KV takes at most `BANK_BYTES` together are stacked into a `Bank` `[L, N, Hkv, P, D]`,
built once per set of prefixes and kept while the same prefix tensors last, and attended in one call;
each prefix's rows are that call's query rows, padded to the largest group. Longer prefixes get one
call each: there the call's own cost is small next to its work, and a stacked copy would double
their memory.

Guarantees: a bank is reused only while its source tensors are the very objects it was stacked from
(a staged prefix never changes after it is gathered; a regathered one is a new object), so a bank
never holds stale KV. Results equal one call per prefix up to the kernel's rounding (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.rollout.engine.model import CPU_FLASH_ATTENTION as _CPU_FLASH

NEG_INF = float("-inf")
PrefixKV = tuple[torch.Tensor, torch.Tensor]
"""A staged prefix's keys and values `[L, Hkv, P, D]`."""
BANK_BYTES = 64 * 2**20
"""Most bytes (keys and values) of the prefixes stacked into one bank."""


@dataclass
class Bank:
    """Prefixes of one length stacked `[L, N, Hkv, P, D]` (or one prefix as a view, N = 1, no sources)."""

    sources: tuple[PrefixKV, ...]
    k: torch.Tensor
    v: torch.Tensor


@dataclass
class PrefixBatch:
    """The rows attending a bank's prefixes. Prefix j's rows are query slots `j*per_prefix ..` of the
    call, padded to `per_prefix` rows each; `rows_index` is a slice of the rows when that layout is the
    rows' own (equal counts, consecutive rows), else each slot's row (padding: the zero row past the
    last); `slots` then picks the rows' slots back out of the call's output."""

    bank: Bank
    rows: list[int]
    per_prefix: int
    rows_index: slice | torch.Tensor
    slots: torch.Tensor | None


def plan_batches(groups: list[tuple[PrefixKV, list[int]]], banks: dict[tuple[int, ...], Bank], num_rows: int,
                 device: torch.device) -> tuple[list[PrefixBatch], dict[tuple[int, ...], Bank]]:
    """This step's kernel calls for `groups` (each prefix with the stage rows attending it, of
    `num_rows` rows), reusing last step's `banks`; returns the calls and the banks they use (the
    next step's `banks`)."""
    by_length: dict[int, list[tuple[PrefixKV, list[int]]]] = {}
    for kv, rows in groups:
        by_length.setdefault(kv[0].shape[2], []).append((kv, rows))
    used: dict[tuple[int, ...], Bank] = {}
    batches = []
    for same in by_length.values():
        stacked = len(same) > 1 and sum(2 * kv[0].nbytes for kv, _ in same) <= BANK_BYTES
        for members in ([same] if stacked else [[one] for one in same]):
            batches.append(_batch(members, banks, used, num_rows, device))
    return batches, used


def _batch(members: list[tuple[PrefixKV, list[int]]], banks: dict[tuple[int, ...], Bank],
           used: dict[tuple[int, ...], Bank], num_rows: int, device: torch.device) -> PrefixBatch:
    """One kernel call's worth: prefixes of one length (stacked, or one as a view) and their rows."""
    if len(members) == 1:
        k, v = members[0][0]
        bank = Bank((), k[:, None], v[:, None])  # [L, 1, Hkv, P, D] views
    else:
        key = tuple(id(kv[0]) for kv, _ in members)
        bank = banks.get(key) or used.get(key) or Bank(
            tuple(kv for kv, _ in members), torch.stack([kv[0] for kv, _ in members], 1),
            torch.stack([kv[1] for kv, _ in members], 1))
        used[key] = bank  # the sources it holds keep their ids from being reused
    width = max(len(rows) for _, rows in members)
    rows = [r for _, member_rows in members for r in member_rows]
    if all(len(r) == width for _, r in members) and rows == list(range(rows[0], rows[0] + len(rows))):
        return PrefixBatch(bank, rows, width, slice(rows[0], rows[0] + len(rows)), None)
    gather = [r for _, member_rows in members for r in member_rows + [num_rows] * (width - len(member_rows))]
    slots = [j * width + i for j, (_, member_rows) in enumerate(members) for i in range(len(member_rows))]
    return PrefixBatch(bank, rows, width, torch.tensor(gather, dtype=torch.long, device=device),
                       torch.tensor(slots, dtype=torch.long, device=device))


def prefix_part(batches: list[PrefixBatch], layer: int, qg: torch.Tensor, plain_rows: int,
                unplan: torch.Tensor | None, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's attention over its prefix alone, for queries `qg` `[B, Hkv, G, D]` scaled by `scale` (row
    order): output `[B, Hkv, G, D]` and log-sum-exp `[B, Hkv, G, 1]`. Rows come in plan order (the
    batches' rows, then `plain_rows` rows without a prefix, which get 0 and -inf) and are put back in
    row order by `unplan` (None: already)."""
    b, hkv, g, d = qg.shape
    padded = None
    outs, lses = [], []
    for batch in batches:
        n, width = batch.bank.k.shape[1], batch.per_prefix
        if isinstance(batch.rows_index, slice):
            q = qg[batch.rows_index]  # [n*width, Hkv, G, D]
        else:
            if padded is None:
                padded = torch.cat([qg, qg.new_zeros(1, hkv, g, d)])
            q = padded[batch.rows_index]
        q = q.view(n, width, hkv, g, d).transpose(1, 2).reshape(n, hkv, width * g, d)
        out, lse = prefix_attention(q, batch.bank.k[layer], batch.bank.v[layer], scale)  # [n, Hkv, width*G, D|1]
        out = out.view(n, hkv, width, g, d).transpose(1, 2).reshape(n * width, hkv, g, d)
        lse = lse.view(n, hkv, width, g, 1).transpose(1, 2).reshape(n * width, hkv, g, 1)
        if batch.slots is not None:  # drop the padding
            out, lse = out[batch.slots], lse[batch.slots]
        outs.append(out)
        lses.append(lse)
    if plain_rows:
        outs.append(qg.new_zeros(plain_rows, hkv, g, d))
        lses.append(qg.new_full((plain_rows, hkv, g, 1), NEG_INF))
    out_pre = outs[0] if len(outs) == 1 else torch.cat(outs)  # plan order
    lse_pre = lses[0] if len(lses) == 1 else torch.cat(lses)
    if unplan is not None:
        out_pre, lse_pre = out_pre[unplan], lse_pre[unplan]
    return out_pre, lse_pre


def prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Unmasked attention of queries `[N, Hkv, M, D]` (scores `q k^T * scale`) over shared prefixes
    `[N, Hkv, P, D]` (query block i attends prefix i): output `[N, Hkv, M, D]` and log-sum-exp `[N, Hkv,
    M, 1]`. On CPU the flash kernel works through the prefix in tiles (2-5x faster than the matmul pair
    at 16K positions and hundreds of rows, measured on the 2-core VM); elsewhere the explicit form."""
    if _CPU_FLASH is not None and q.device.type == "cpu":
        out, lse = _CPU_FLASH(q, k, v, 0.0, False, scale=scale)  # [N, Hkv, M, D], [N, Hkv, M]
        return out, lse[..., None]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [N, Hkv, M, P]
    lse = torch.logsumexp(scores, -1, keepdim=True)
    return torch.matmul(torch.exp(scores - lse), v), lse
