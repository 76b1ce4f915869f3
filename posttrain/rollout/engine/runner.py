"""The model runner: owns the paged KV tensors and runs one scheduled step of the model.

The only part of the native engine that touches tensors. KV lives in two tensors `[L, slots, Hkv, D]`
(keys, values) with `slots = num_blocks * block_size`. A step's tokens are flattened `[N]`; every
layer writes their K/V into their slots and then each chunk gathers the slots of its context from its
block table. Decode chunks are batched into one padded attention call; prefill chunks attend one at a
time. Also implements the `KVMover` the radix cache uses to copy, offload and reload KV.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from posttrain.rollout.engine.attention import (
    AttentionConfig,
    chunk_mask,
    key_positions,
    quest_select_blocks,
)
from posttrain.rollout.engine.model import CausalLMWeights, attend
from posttrain.rollout.engine.scheduler import Chunk


@dataclass
class _Group:
    """Queries of one attention call: rows of the flat step, key slots `[B, S]`, mask `[B, 1, Tq, S]`."""

    rows: torch.Tensor
    slots: torch.Tensor
    mask: torch.Tensor
    block_slots: torch.Tensor | None = None  # quest: [B, NB, bs]
    valid_blocks: torch.Tensor | None = None  # quest: [B, NB]
    num_queries: int = 1


class ModelRunner:
    """Paged KV cache plus the forward of one step (see module docstring)."""

    def __init__(self, weights: CausalLMWeights, num_blocks: int, block_size: int,
                 attention: AttentionConfig) -> None:
        self.w = weights
        self.block_size = block_size
        self.attention = attention
        shape = (weights.num_layers, num_blocks * block_size, weights.num_kv_heads, weights.head_dim)
        self.k = torch.zeros(shape, dtype=weights.dtype, device=weights.device)
        self.v = torch.zeros(shape, dtype=weights.dtype, device=weights.device)

    @property
    def bytes_per_token(self) -> int:
        return 2 * self.k.shape[0] * self.k.shape[2] * self.k.shape[3] * self.k.element_size()

    # ---- KVMover --------------------------------------------------------------------------
    def copy_block_prefix(self, src_block: int, dst_block: int, num_slots: int) -> None:
        s, d = src_block * self.block_size, dst_block * self.block_size
        self.k[:, d : d + num_slots] = self.k[:, s : s + num_slots]
        self.v[:, d : d + num_slots] = self.v[:, s : s + num_slots]

    def read_slots(self, slots: list[int]) -> torch.Tensor:
        idx = torch.tensor(slots, device=self.k.device)
        return torch.stack([self.k[:, idx], self.v[:, idx]]).cpu()  # [2, L, T, Hkv, D]

    def write_slots(self, slots: list[int], kv: torch.Tensor) -> None:
        idx = torch.tensor(slots, device=self.k.device)
        kv = kv.to(self.k.device, non_blocking=True)
        self.k[:, idx] = kv[0]
        self.v[:, idx] = kv[1]

    # ---- forward --------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, chunks: list[Chunk]) -> torch.Tensor:
        """Compute all chunks; returns float32 logits `[M, V]` for the chunks that need them, in order."""
        dev = self.k.device
        ids, positions, write = self._flatten(chunks)
        groups = self._groups(chunks)
        x = self.w.embed(ids)  # [N, E]
        cos, sin = self.w.rope(positions)
        for layer in range(self.w.num_layers):
            q, k, v = self.w.qkv(layer, x, cos, sin)  # [N, H, D], [N, Hkv, D]
            self.k[layer, write] = k
            self.v[layer, write] = v
            out = torch.empty_like(q)
            for group in groups:
                out[group.rows] = self._attend(layer, q, group)
            x = self.w.finish_layer(layer, x, out.reshape(x.shape[0], -1))
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
        decode_rows: list[int] = []
        decode_chunks: list[Chunk] = []
        row = 0
        for c in chunks:
            if c.num_tokens == 1:
                decode_rows.append(row)
                decode_chunks.append(c)
            else:
                groups.append(self._prefill_group(c, row))
            row += c.num_tokens
        if decode_chunks:
            groups.append(self._decode_group(decode_chunks, decode_rows))
        return groups

    def _prefill_group(self, c: Chunk, row: int) -> _Group:
        keys = key_positions(self.attention, c.start, c.num_tokens)  # [S]
        slots = self._slots_of(c.seq.block_table, keys)
        mask = chunk_mask(self.attention, keys, c.start, c.num_tokens)  # [Tq, S]
        dev = self.k.device
        rows = torch.arange(row, row + c.num_tokens, device=dev)
        return _Group(rows, slots[None].to(dev), mask[None, None].to(dev), num_queries=c.num_tokens)

    def _decode_group(self, chunks: list[Chunk], rows: list[int]) -> _Group:
        dev = self.k.device
        if self.attention.kind == "quest":
            return self._quest_group(chunks, rows)
        per_seq = [self._slots_of(c.seq.block_table, key_positions(self.attention, c.start, 1)) for c in chunks]
        width = max(len(s) for s in per_seq)
        slots = torch.zeros(len(chunks), width, dtype=torch.long)
        mask = torch.zeros(len(chunks), 1, 1, width, dtype=torch.bool)
        for b, s in enumerate(per_seq):
            slots[b, : len(s)] = s
            mask[b, 0, 0, : len(s)] = True
        return _Group(torch.tensor(rows, device=dev), slots.to(dev), mask.to(dev))

    def _quest_group(self, chunks: list[Chunk], rows: list[int]) -> _Group:
        bs = self.block_size
        num_blocks = [-(-(c.start + 1) // bs) for c in chunks]
        width = max(num_blocks)
        block_slots = torch.zeros(len(chunks), width, bs, dtype=torch.long)
        positions = torch.zeros(len(chunks), width, bs, dtype=torch.long)
        for b, c in enumerate(chunks):
            pos = torch.arange(width * bs).view(width, bs).clamp(max=c.start)  # pad with the newest key
            positions[b] = torch.arange(width * bs).view(width, bs)
            table = c.seq.block_table + [c.seq.block_table[-1]] * (width - num_blocks[b])
            block_slots[b] = self._slots_of(table, pos)
        valid_blocks = torch.arange(width)[None] < torch.tensor(num_blocks)[:, None]  # [B, NB]
        limit = torch.tensor([c.start for c in chunks])[:, None, None]
        mask = (positions <= limit).view(len(chunks), 1, 1, -1)
        dev = self.k.device
        return _Group(torch.tensor(rows, device=dev), block_slots.view(len(chunks), -1).to(dev),
                      mask.to(dev), block_slots.to(dev), valid_blocks.to(dev))

    def _attend(self, layer: int, q_all: torch.Tensor, g: _Group) -> torch.Tensor:
        b = g.slots.shape[0]
        q = q_all[g.rows].view(b, g.num_queries, *q_all.shape[1:]).transpose(1, 2)  # [B, H, Tq, D]
        slots, mask = g.slots, g.mask
        if g.block_slots is not None and g.valid_blocks is not None:
            k_blocks = self.k[layer][g.block_slots]  # [B, NB, bs, Hkv, D]
            keep = quest_select_blocks(q[:, :, 0], k_blocks, g.valid_blocks, self.attention.top_k_blocks)
            bsz = self.block_size
            slots = torch.gather(g.block_slots, 1, keep[:, :, None].expand(-1, -1, bsz)).view(b, -1)
            mask_blocks = g.mask.view(b, -1, bsz)
            mask = torch.gather(mask_blocks, 1, keep[:, :, None].expand(-1, -1, bsz)).view(b, 1, 1, -1)
        k = self.k[layer][slots].transpose(1, 2)  # [B, Hkv, S, D]
        v = self.v[layer][slots].transpose(1, 2)
        out = attend(q, k, v, mask)  # [B, H, Tq, D]
        return out.transpose(1, 2).reshape(-1, *q_all.shape[1:])
