"""The model runner: owns the paged KV tensors and runs one scheduled step of the model.

The only part of the native engine that touches tensors. KV lives in two tensors `[L, slots, Hkv, D]`
(keys, values) with `slots = num_blocks * block_size`. A step's tokens are flattened `[N]`; every
layer writes their K/V into their slots. Each prefill chunk then gathers the slots of its context from
its block table and attends: on CPU without a mask (its cached history and its own causal block
apart, merged by log-sum-exp), elsewhere with SDPA and an explicit mask. Exact decode chunks are batched and attend staged contiguous
copies of their context that persist across steps (`decode_stage`), so a decode step does not gather
the whole context again. Sparse modes gather per step: `window` its keys, `quest` the blocks it picks
from per-block key bounds it keeps up to date (`kmin`/`kmax`, refreshed for blocks written since).
Also implements the `KVMover` the radix cache uses to copy, offload and reload KV.
"""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass

import torch

from posttrain.rollout.engine.attention import (
    AttentionConfig,
    chunk_mask,
    key_positions,
    quest_select_from_bounds,
)
from posttrain.rollout.engine.decode_stage import DecodeStage, StageCache
from posttrain.rollout.engine.model import (
    CausalLMWeights,
    attend,
    attend_after_history,
    can_attend_after_history,
)
from posttrain.rollout.engine.rope_keys import rope_length
from posttrain.rollout.engine.scheduler import Chunk


@dataclass
class _Group:
    """Queries of one attention call over gathered keys.

    rows: positions in the flat step `[B*Tq]`; keys come from whole blocks `blocks` `[B, NB]` or from
    single slots `slots` `[B, S]`; mask `[B, 1, Tq, S]` says which gathered keys each query sees (boolean
    for decode, additive 0 / -inf for prefill chunks).
    `stage`: exact decode queries attend their staged contiguous KV instead (no mask, no gather).
    `history` (exact prefill on CPU): the chunk follows this many cached positions; its keys are
    gathered from `blocks` and attended without a mask (`attend_after_history`).
    `refresh` (quest): blocks of `blocks` whose key bounds are stale and are recomputed this step.
    """

    rows: torch.Tensor
    mask: torch.Tensor | None = None
    blocks: torch.Tensor | None = None
    slots: torch.Tensor | None = None
    num_queries: int = 1
    quest: bool = False
    refresh: torch.Tensor | None = None
    stage: DecodeStage | None = None
    history: int | None = None
    span: slice | None = None
    """`rows` as a slice when they are consecutive (read as views, not gathered)."""


class ModelRunner:
    """Paged KV cache plus the forward of one step (see module docstring)."""

    def __init__(self, weights: CausalLMWeights, num_blocks: int, block_size: int,
                 attention: AttentionConfig, min_shared_blocks: int = 4) -> None:
        self.w = weights
        self.min_shared_blocks = min_shared_blocks
        self.block_size = block_size
        self.attention = attention
        shape = (weights.num_layers, num_blocks * block_size, weights.num_kv_heads, weights.head_dim)
        self.k = pool_zeros(shape, weights.dtype, weights.device)
        self.v = pool_zeros(shape, weights.dtype, weights.device)
        self.stages = StageCache(self.k, self.v, block_size)
        self.quest = attention.kind == "quest"
        self.refresh_all_bounds = False
        """Recompute every attended block's bounds each step (tests compare against this)."""
        if self.quest:  # per-block elementwise key bounds, [L, blocks, Hkv, D], and which are stale
            bounds = (weights.num_layers, num_blocks, weights.num_kv_heads, weights.head_dim)
            self.kmin = torch.zeros(bounds, dtype=weights.dtype, device=weights.device)
            self.kmax = torch.zeros(bounds, dtype=weights.dtype, device=weights.device)
            self.stale = torch.ones(num_blocks, dtype=torch.bool, device=weights.device)
        self.masked_prefill = not can_attend_after_history(weights.device)
        """Exact prefill chunks attend through an explicit `[Tq, S]` mask (always off CPU)."""

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.k.shape[0] * self.k.shape[2] * self.k.shape[3] * self.k.element_size()

    # ---- KVMover --------------------------------------------------------------------------
    def copy_block_prefix(self, src_block: int, dst_block: int, num_slots: int) -> None:
        s, d = src_block * self.block_size, dst_block * self.block_size
        self.k[:, d : d + num_slots] = self.k[:, s : s + num_slots]
        self.v[:, d : d + num_slots] = self.v[:, s : s + num_slots]
        if self.quest:
            self.stale[dst_block] = True

    def read_slots(self, slots: list[int]) -> torch.Tensor:
        idx = torch.tensor(slots, device=self.k.device)
        return torch.stack([self.k[:, idx], self.v[:, idx]]).cpu()  # [2, L, T, Hkv, D]

    def write_slots(self, slots: list[int], kv: torch.Tensor) -> None:
        idx = torch.tensor(slots, device=self.k.device)
        kv = kv.to(self.k.device, non_blocking=True)
        self.k[:, idx] = kv[0]
        self.v[:, idx] = kv[1]
        if self.quest:
            self.stale[idx // self.block_size] = True

    def release_staged(self) -> None:
        """Drop decode stages (the engine calls this when no request is left)."""
        self.stages.clear()

    # ---- forward --------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, chunks: list[Chunk]) -> torch.Tensor:
        """Compute all chunks; returns float32 logits `[M, V]` for the chunks that need them, in order."""
        dev = self.k.device
        self.w.refresh()
        ids, positions, write = self._flatten(chunks)
        lengths = None if self.w.rope_keys.is_static else _rope_lengths(chunks)
        if self.quest:
            self.stale[write // self.block_size] = True
        groups = self._groups(chunks)
        x = self.w.embed(ids)  # [N, E]
        cos, sin = self.w.rope(positions, lengths)
        whole = len(groups) == 1 and torch.equal(groups[0].rows, torch.arange(ids.shape[0], device=dev))
        # A step whose queries all attend staged KV reads nothing of this step from the pool: its K/V
        # go to the pool once for all layers after the last one, not in two small writes per layer.
        deferred: tuple[list[torch.Tensor], list[torch.Tensor]] | None = (
            ([], []) if all(g.stage is not None for g in groups) else None)
        for layer in range(self.w.num_layers):
            q, k, v = self.w.qkv(layer, x, cos, sin)  # [N, H, D], [N, Hkv, D]
            if deferred is None:
                self.k[layer].index_copy_(0, write, k)
                self.v[layer].index_copy_(0, write, v)
            else:
                deferred[0].append(k)
                deferred[1].append(v)
            if whole:
                out = self._attend(layer, q, k, v, groups[0])
            else:
                out = torch.empty_like(q)
                for group in groups:
                    out[group.rows] = self._attend(layer, q, k, v, group)
            x = self.w.finish_layer(layer, x, out.reshape(x.shape[0], -1))
        if deferred is not None:
            self.k.index_copy_(1, write, torch.stack(deferred[0]))  # [L, N, Hkv, D]
            self.v.index_copy_(1, write, torch.stack(deferred[1]))
        self.stages.end_step()
        for group in groups:
            if group.refresh is not None:
                self.stale[group.refresh] = False
        ends, row = [], 0
        for chunk in chunks:
            row += chunk.num_tokens
            if chunk.needs_logits:
                ends.append(row - 1)
        return self.w.logits(x[torch.tensor(ends, dtype=torch.long, device=dev)])

    def _flatten(self, chunks: list[Chunk]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        bs = self.block_size
        ids: list[int] = []
        positions: list[int] = []
        write: list[int] = []
        for c in chunks:
            table = c.seq.block_table
            ids.extend(c.seq.token_ids[c.start : c.start + c.num_tokens])
            for p in range(c.start, c.start + c.num_tokens):
                positions.append(p)
                write.append(table[p // bs] * bs + p % bs)
        dev = self.k.device
        as_tensor = lambda xs: torch.tensor(xs, dtype=torch.long, device=dev)  # noqa: E731
        return as_tensor(ids), as_tensor(positions), as_tensor(write)

    def _slots_of(self, table: list[int], positions: torch.Tensor) -> torch.Tensor:
        t = torch.tensor(table, dtype=torch.long)
        return t[positions // self.block_size] * self.block_size + positions % self.block_size

    def _groups(self, chunks: list[Chunk]) -> list[_Group]:
        groups: list[_Group] = []
        decode: list[tuple[int, Chunk]] = []
        row = 0
        for c in chunks:
            if c.num_tokens == 1:
                decode.append((row, c))
            else:
                groups.append(self._prefill_group(c, row))
            row += c.num_tokens
        if self.attention.kind == "window":
            groups.extend(self._window_group(decode) for _ in range(1 if decode else 0))
        else:
            groups.extend(self._decode_groups(decode))
        return groups

    def _prefill_group(self, c: Chunk, row: int) -> _Group:
        dev = self.k.device
        rows = torch.arange(row, row + c.num_tokens, device=dev)
        if self.attention.kind == "window":
            keys = key_positions(self.attention, c.start, c.num_tokens)  # [S]
            mask = chunk_mask(self.attention, keys, c.start, c.num_tokens)  # [Tq, S]
            slots = self._slots_of(c.seq.block_table, keys)
            return _Group(rows, _additive(mask[None, None].to(dev), self.k.dtype), slots=slots[None].to(dev),
                          num_queries=c.num_tokens)
        num_blocks = -(-(c.start + c.num_tokens) // self.block_size)
        if not self.masked_prefill:
            blocks = torch.tensor(c.seq.block_table[:num_blocks], device=dev)
            return _Group(rows, blocks=blocks[None], num_queries=c.num_tokens, history=c.start)
        keys = torch.arange(num_blocks * self.block_size)
        mask = chunk_mask(self.attention, keys, c.start, c.num_tokens)  # [Tq, S]
        blocks = torch.tensor(c.seq.block_table[:num_blocks], device=dev)
        return _Group(rows, _additive(mask[None, None].to(dev), self.k.dtype), blocks=blocks[None], num_queries=c.num_tokens)

    def _window_group(self, decode: list[tuple[int, Chunk]]) -> _Group:
        dev = self.k.device
        per_seq = [self._slots_of(c.seq.block_table, key_positions(self.attention, c.start, 1)) for _, c in decode]
        width = max(len(s) for s in per_seq)
        slots = torch.zeros(len(decode), width, dtype=torch.long)
        mask = torch.zeros(len(decode), 1, 1, width, dtype=torch.bool)
        for b, s in enumerate(per_seq):
            slots[b, : len(s)] = s
            mask[b, 0, 0, : len(s)] = True
        return _Group(torch.tensor([r for r, _ in decode], device=dev), mask.to(dev), slots=slots.to(dev))

    def _decode_groups(self, decode: list[tuple[int, Chunk]]) -> list[_Group]:
        """Exact decode attends staged KV; sequences whose tables start with the same blocks (a GRPO
        group) attend that prefix once, all prefixes of a size class in one stage. Quest scores blocks
        gathered from the pool."""
        if not decode:
            return []
        if self.attention.kind == "quest":
            return [self._block_group(decode)]
        by_first: dict[int, list[tuple[int, Chunk]]] = {}
        for item in decode:
            by_first.setdefault(item[1].seq.block_table[0], []).append(item)
        prefix_of: dict[int, list[int]] = {}  # flat row -> shared blocks it attends apart
        for first, members in by_first.items():
            shared, fit, rest = self._live_prefix(first, members)
            for row, _ in fit:  # last step's prefix of these blocks takes the members that map it
                prefix_of[row] = shared
            for shared, part in self._split_by_prefix(rest):
                for row, _ in part:
                    prefix_of[row] = shared
        chunks = [c for _, c in decode]
        placed = self.stages.assign([c.seq for c in chunks], [c.start for c in chunks],
                                    [prefix_of[row] for row, _ in decode])
        return [_stage_group([decode[i][0] for i in idx], stage, self.k.device) for stage, idx in placed]

    def _live_prefix(self, first: int, members: list[tuple[int, Chunk]]
                     ) -> tuple[list[int], list[tuple[int, Chunk]], list[tuple[int, Chunk]]]:
        """The longest prefix of a live stage that at least half the members map past, with those
        members and the rest; ([], [], members) when there is none. Joining that stage costs only the
        joiners' rows, where a new prefix would restage every member."""
        for shared in self.stages.prefixes(first):
            n = len(shared)
            fit = [m for m in members if m[1].start >= n * self.block_size and m[1].seq.block_table[:n] == shared]
            if fit and 2 * len(fit) >= len(members):
                taken = {id(m) for m in fit}
                return shared, fit, [m for m in members if id(m) not in taken]
        return [], [], members

    def _split_by_prefix(self, members: list[tuple[int, Chunk]]) -> list[tuple[list[int], list[tuple[int, Chunk]]]]:
        """Members partitioned by the leading full blocks they share: the blocks all of a part map when
        they are at least `min_shared_blocks` (a document or system prompt before many questions),
        else the part is split where its members' tables first differ and each piece is tried again
        (GRPO groups whose prompts share only a short chat-template head); members left alone or
        sharing too little attend no prefix."""
        if len(members) < 2:
            return [([], members)]
        tables = [c.seq.block_table[: c.start // self.block_size] for _, c in members]
        common = _common_prefix(tables)
        if common >= self.min_shared_blocks:
            return [(tables[0][:common], members)]
        by_next: dict[int, list[tuple[int, Chunk]]] = {}
        alone: list[tuple[int, Chunk]] = []
        for member, table in zip(members, tables, strict=True):
            if len(table) > common:
                by_next.setdefault(table[common], []).append(member)
            else:
                alone.append(member)
        parts: list[tuple[list[int], list[tuple[int, Chunk]]]] = [([], alone)] if alone else []
        for part in by_next.values():
            parts.extend(self._split_by_prefix(part))
        return parts

    def _block_group(self, decode: list[tuple[int, Chunk]]) -> _Group:
        dev, bs = self.k.device, self.block_size
        tables = [c.seq.block_table[: c.start // bs + 1] for _, c in decode]
        width = max(len(t) for t in tables)
        blocks = torch.tensor([t + [t[-1]] * (width - len(t)) for t in tables], dtype=torch.long)
        positions = torch.arange(width * bs)  # [S]
        limit = torch.tensor([c.start for _, c in decode])[:, None]  # [B, 1]
        mask = (positions[None] <= limit)[:, None, None, :]  # [B, 1, 1, S]
        rows = torch.tensor([r for r, _ in decode], device=dev)
        blocks, mask = blocks.to(dev), mask.to(dev)
        used = torch.unique(blocks)
        refresh = used if self.refresh_all_bounds else used[self.stale[used]]
        return _Group(rows, mask, blocks=blocks, quest=True, refresh=refresh)

    def _attend(self, layer: int, q_all: torch.Tensor, k_all: torch.Tensor, v_all: torch.Tensor,
                g: _Group) -> torch.Tensor:
        """Attention output `[B*Tq, H, D]` of the group's queries (this step's K/V already in the pool)."""
        if g.stage is not None:
            rows = g.rows if g.span is None else g.span
            g.stage.write(layer, k_all[rows], v_all[rows])
            return g.stage.attend(layer, q_all[rows])
        if g.history is not None:
            assert g.blocks is not None
            q = q_all[g.rows].view(1, g.num_queries, *q_all.shape[1:]).transpose(1, 2)  # [1, H, Tq, D]
            end = g.history + g.num_queries
            k = self._paged(self.k, layer)[g.blocks[0]].flatten(0, 1)[:end].transpose(0, 1).contiguous()
            v = self._paged(self.v, layer)[g.blocks[0]].flatten(0, 1)[:end].transpose(0, 1).contiguous()
            out = attend_after_history(q, k[None], v[None], g.history)  # [1, H, Tq, D]
            return out.transpose(1, 2).reshape(-1, *q_all.shape[1:])
        assert g.mask is not None
        b = g.mask.shape[0]
        q = q_all[g.rows].view(b, g.num_queries, *q_all.shape[1:]).transpose(1, 2)  # [B, H, Tq, D]
        mask = g.mask
        if g.slots is not None:
            k = self.k[layer][g.slots]  # [B, S, Hkv, D]
            v = self.v[layer][g.slots]
        else:
            assert g.blocks is not None
            blocks = g.blocks
            if g.quest:
                blocks, mask = self._quest_pick(layer, q, g)
            k = self._paged(self.k, layer)[blocks].flatten(1, 2)  # [B, NB*bs, Hkv, D]
            v = self._paged(self.v, layer)[blocks].flatten(1, 2)
        out = attend(q, k.transpose(1, 2), v.transpose(1, 2), mask)  # [B, H, Tq, D]
        return out.transpose(1, 2).reshape(-1, *q_all.shape[1:])

    def _paged(self, cache: torch.Tensor, layer: int) -> torch.Tensor:
        return cache[layer].view(-1, self.block_size, *cache.shape[2:])  # [blocks, bs, Hkv, D]

    def _quest_pick(self, layer: int, q: torch.Tensor, g: _Group) -> tuple[torch.Tensor, torch.Tensor]:
        assert g.blocks is not None and g.mask is not None and g.refresh is not None
        b, nb, bs = g.blocks.shape[0], g.blocks.shape[1], self.block_size
        if g.refresh.numel():  # blocks written since their bounds were taken (this step's K included)
            keys = self._paged(self.k, layer)[g.refresh]  # [R, bs, Hkv, D]
            self.kmin[layer, g.refresh] = keys.amin(dim=1)
            self.kmax[layer, g.refresh] = keys.amax(dim=1)
        # every attended block but the newest is full, and the newest is always kept: the bounds of
        # the unwritten slots of a partly filled block never matter
        block_mask = g.mask.view(b, nb, bs)
        keep = quest_select_from_bounds(q[:, :, 0], self.kmin[layer][g.blocks], self.kmax[layer][g.blocks],
                                        block_mask[:, :, 0], self.attention.top_k_blocks)
        mask = torch.gather(block_mask, 1, keep[:, :, None].expand(-1, -1, bs)).view(b, 1, 1, -1)
        return torch.gather(g.blocks, 1, keep), mask


def _stage_group(rows: list[int], stage: DecodeStage, device: torch.device) -> _Group:
    span = slice(rows[0], rows[-1] + 1) if rows == list(range(rows[0], rows[0] + len(rows))) else None
    return _Group(torch.tensor(rows, device=device), stage=stage, span=span)


def pool_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A zero tensor for the KV pool. On CPU its memory is a fresh anonymous mapping: the kernel maps
    zeroed pages on first touch, so a pool sized for the largest workload (`kv_cache_tokens`, 3 GB for
    SmolLM2 at the default) costs only the blocks a run writes, where `torch.zeros` writes every byte
    up front (W7's native run, a fresh engine each time: 16.4 s with it, 11.0 s without; docs/rollout.md).
    The mapping asks for small pages (`MADV_NOHUGEPAGE`): with 2 MB pages, the decode step whose
    writes first reached a new page in each of SmolLM2's 30 layers spent 83-90 ms in each of its two
    pool writes (the kernel compacting memory to find huge pages; the other steps' writes took about
    0.15 ms), and W7's native run took 9.15 s against 8.89 s on small pages. Elsewhere `torch.zeros`."""
    if device.type != "cpu":
        return torch.zeros(shape, dtype=dtype, device=device)
    nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
    if nbytes == 0:
        return torch.zeros(shape, dtype=dtype)
    buffer = mmap.mmap(-1, nbytes)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buffer.madvise(mmap.MADV_NOHUGEPAGE)
    return torch.frombuffer(buffer, dtype=dtype).view(shape)  # the tensor keeps the mapping alive


def _rope_lengths(chunks: list[Chunk]) -> list[int]:
    """Each flattened token's `rope_length` (the sequence length its RoPE frequencies belong to)."""
    return [rope_length(c.seq.prompt_len, p) for c in chunks for p in range(c.start, c.start + c.num_tokens)]


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask as the additive mask SDPA would otherwise build again in every layer."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def _common_prefix(tables: list[list[int]]) -> int:
    """Number of leading blocks all tables share."""
    n = min(len(t) for t in tables)
    first = tables[0]
    for i in range(n):
        if any(t[i] != first[i] for t in tables):
            return i
    return n
