"""Decode staging: contiguous copies of the KV that decoding sequences attend, extended step by step.

A decode step reads the whole context of every decoding sequence. Gathering that context from its
scattered blocks at every step copies it (per layer) before attention reads it again, so a decode
step moved about three times the bytes of the KV it needs, and on small models that traffic was most
of the step. A `DecodeStage` keeps, for one fixed list of decoding sequences, their KV in contiguous
tensors `[L, B, Hkv, cap, D]` and appends each step's new position next to the pool write, so a step
reads every cached key once. Members that map the same leading blocks (a GRPO group) keep those
blocks once (`[L, Hkv, P, D]`) and attend them with one matmul for the whole group; the two parts are
merged by their log-sum-exps (cascade attention), which equals attention over the concatenation.

Validity: a staged position is a copy of KV that never changes while its sequence keeps the same
block table object (positions below `num_computed` are never rewritten; a preempted or readmitted
sequence gets a new table). A stage is reused only when every member still has the table it was
built from and is exactly one position further, else it is rebuilt from the pool. `StageCache`
drops every stage a step does not use, so staging holds at most one extra copy of the decoding
sequences' context. The pool stays the source of truth; nothing is written back.
Not here: which sequences form a group (the runner decides), sparse attention modes (not staged).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posttrain.rollout.engine.seq_state import SeqState

NEG_INF = float("-inf")


def _capacity(num_positions: int, most: int | None = None) -> int:
    """Room for `num_positions` plus growth: a power of two, so growing is amortised O(1) per step,
    but no more than `most` (the positions the members can still reach) when that is enough."""
    cap = max(64, 1 << num_positions.bit_length())
    return cap if most is None else max(num_positions, min(cap, most))


def _reachable(members: Sequence[SeqState], first_pos: int) -> int:
    """The most positions from `first_pos` any member stages before its token budget runs out."""
    return max(s.prompt_len + s.params.max_new_tokens for s in members) - first_pos


class DecodeStage:
    """Staged KV of decoding sequences whose first `len(shared)` blocks are common (see module doc)."""

    def __init__(self, seq_ids: tuple[int, ...], tables: list[list[int]], shared: list[int],
                 lengths: list[int], block_size: int, kv: tuple[torch.Tensor, torch.Tensor],
                 bias: torch.Tensor, prefix: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        self.seq_ids = seq_ids
        self.tables = tables  # the members' block table objects, to detect preemption
        self.shared = shared
        self.block_size = block_size
        self.first_pos = len(shared) * block_size
        self.lengths = lengths  # staged positions per member, from first_pos on
        self.k, self.v = kv  # [L, B, Hkv, cap, D]
        self.bias = bias  # [B, cap]: 0 where staged, -inf elsewhere
        self.prefix = prefix  # shared blocks' keys and values [L, Hkv, P, D]
        self._write_index = torch.empty(0, dtype=torch.long, device=self.k.device)
        self._width = 0

    def tensors(self) -> list[torch.Tensor]:
        """The tensors this stage holds (for memory accounting)."""
        return [self.k, self.v, self.bias, *(self.prefix or ())]

    @classmethod
    def gather(cls, pool_k: torch.Tensor, pool_v: torch.Tensor, block_size: int,
               members: Sequence[SeqState], starts: Sequence[int], shared: Sequence[int]) -> DecodeStage:
        """Stage each member's KV before its position in `starts`, copied from the pool."""
        dev, bs = pool_k.device, block_size
        first_pos = len(shared) * bs
        lengths = [p - first_pos for p in starts]
        prefix = None
        if shared:
            blocks = torch.tensor(list(shared), dtype=torch.long)
            slots = (blocks[:, None] * bs + torch.arange(bs)).flatten().to(dev)
            # [L, P, Hkv, D] -> [L, Hkv, P, D]: each head's keys contiguous for one matmul per group
            prefix = (pool_k[:, slots].transpose(1, 2).contiguous(), pool_v[:, slots].transpose(1, 2).contiguous())
        width = max(lengths)
        cap = _capacity(width + 1, _reachable(members, first_pos))
        own = torch.zeros(len(members), width, dtype=torch.long)  # unstaged: slot 0, finite, masked
        bias = torch.full((len(members), cap), NEG_INF, dtype=pool_k.dtype)
        for b, (seq, length) in enumerate(zip(members, lengths, strict=True)):
            positions = torch.arange(first_pos, first_pos + length)
            table = torch.tensor(seq.block_table, dtype=torch.long)
            own[b, :length] = table[positions // bs] * bs + positions % bs
            bias[b, :length] = 0.0
        own = own.flatten().to(dev)
        num_layers, _, hkv, d = pool_k.shape
        shape = (num_layers, len(members), width, hkv, d)

        def stage(pool: torch.Tensor) -> torch.Tensor:
            # only the staged width is gathered; the room past it is zeroed (finite under the -inf bias)
            out = pool.new_empty(num_layers, len(members), hkv, cap, d)
            out[:, :, :, :width] = pool[:, own].view(shape).transpose(2, 3)
            out[:, :, :, width:] = 0.0
            return out

        kv = (stage(pool_k), stage(pool_v))
        return cls(tuple(s.seq_id for s in members), [s.block_table for s in members], list(shared), lengths,
                   bs, kv, bias.to(dev), prefix)

    def select(self, rows: list[int]) -> DecodeStage:
        """A stage of only the members at `rows` (sharing this one's prefix tensors)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.k.device)
        return DecodeStage(tuple(self.seq_ids[b] for b in rows), [self.tables[b] for b in rows], self.shared,
                           [self.lengths[b] for b in rows], self.block_size,
                           (self.k[:, index], self.v[:, index]), self.bias[index], self.prefix)

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def matches(self, members: Sequence[SeqState], starts: Sequence[int]) -> bool:
        """Whether this stage holds exactly every member's context before its position in `starts`."""
        return len(members) == len(self.tables) and all(
            s.block_table is table and p == self.first_pos + n
            for s, p, table, n in zip(members, starts, self.tables, self.lengths, strict=True))

    def advance(self) -> None:
        """Make room for one more position per member; the step's forward writes it (`write`)."""
        if max(self.lengths) >= self.capacity:
            self._grow(_capacity(max(self.lengths) + 1))  # a member outgrew its budget: plain doubling
        dev = self.k.device
        b, hkv, cap = len(self.lengths), self.k.shape[2], self.capacity
        rel = torch.tensor(self.lengths, dtype=torch.long, device=dev)  # [B]
        self.bias[torch.arange(b, device=dev), rel] = 0.0
        heads = torch.arange(hkv, device=dev)
        # flat row of (member b, head h, position rel[b]) in a layer's [B*Hkv*cap, D] view
        self._write_index = ((torch.arange(b, device=dev)[:, None] * hkv + heads) * cap + rel[:, None]).flatten()
        self.lengths = [n + 1 for n in self.lengths]
        self._width = max(self.lengths)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Stage this step's keys/values `[B, Hkv, D]` of layer `layer`."""
        d = k.shape[-1]
        self.k[layer].view(-1, d).index_copy_(0, self._write_index, k.reshape(-1, d))
        self.v[layer].view(-1, d).index_copy_(0, self._write_index, v.reshape(-1, d))

    def attend(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        """Exact attention of decode queries `[B, H, D]` over the staged context; returns `[B, H, D]`."""
        b, h, d = q.shape
        hkv = self.k.shape[2]
        width = self._width
        qg = q.view(b, hkv, h // hkv, d) * d**-0.5  # [B, Hkv, G, D]
        k, v = self.k[layer, :, :, :width], self.v[layer, :, :, :width]  # [B, Hkv, S, D]
        scores = torch.matmul(qg, k.transpose(-1, -2)) + self.bias[:, None, None, :width]  # [B, Hkv, G, S]
        if self.prefix is None:
            return torch.matmul(torch.softmax(scores, -1), v).reshape(b, h, d)
        k_pre, v_pre = self.prefix[0][layer], self.prefix[1][layer]  # [Hkv, P, D]
        q_pre = qg.transpose(0, 1).reshape(hkv, -1, d)  # [Hkv, B*G, D]
        s_pre = torch.matmul(q_pre, k_pre.transpose(-1, -2))  # [Hkv, B*G, P]
        lse_pre = torch.logsumexp(s_pre, -1, keepdim=True)  # [Hkv, B*G, 1]
        out_pre = torch.matmul(torch.exp(s_pre - lse_pre), v_pre)  # [Hkv, B*G, D]
        out_pre = out_pre.view(hkv, b, -1, d).transpose(0, 1)  # [B, Hkv, G, D]
        lse_pre = lse_pre.view(hkv, b, -1, 1).transpose(0, 1)  # [B, Hkv, G, 1]
        lse_own = torch.logsumexp(scores, -1, keepdim=True)  # [B, Hkv, G, 1]
        out_own = torch.matmul(torch.exp(scores - lse_own), v)  # [B, Hkv, G, D]
        lse = torch.logaddexp(lse_pre, lse_own)
        out = out_pre * torch.exp(lse_pre - lse) + out_own * torch.exp(lse_own - lse)
        return out.reshape(b, h, d)

    def rows_of(self, seq_ids: list[int]) -> list[int] | None:
        """Rows of `seq_ids` when they are members in the same order, else None."""
        index = {sid: b for b, sid in enumerate(self.seq_ids)}
        rows = [index.get(sid, -1) for sid in seq_ids]
        return rows if -1 not in rows and rows == sorted(rows) else None

    def _grow(self, cap: int) -> None:
        old = self.capacity
        grow = lambda t, fill: torch.cat([t, t.new_full((*t.shape[:-2], cap - old, t.shape[-1]), fill)], -2)  # noqa: E731
        self.k, self.v = grow(self.k, 0.0), grow(self.v, 0.0)
        self.bias = torch.cat([self.bias, self.bias.new_full((self.bias.shape[0], cap - old), NEG_INF)], 1)


class StageCache:
    """The stages of the current step; a stage the next step does not reuse is dropped."""

    def __init__(self, pool_k: torch.Tensor, pool_v: torch.Tensor, block_size: int) -> None:
        self.pool_k, self.pool_v, self.block_size = pool_k, pool_v, block_size
        self._stages: dict[tuple[int, ...], DecodeStage] = {}
        self._next: dict[tuple[int, ...], DecodeStage] = {}
        self.counters = {"decode_stage_builds": 0, "decode_stage_cuts": 0, "peak_decode_stage_mb": 0.0}

    def find(self, members: Sequence[SeqState], starts: Sequence[int]) -> DecodeStage | None:
        """The reusable stage of exactly these members at these positions, or None."""
        stage = self._stages.get(tuple(s.seq_id for s in members))
        return stage if stage is not None and stage.matches(members, starts) else None

    def use(self, members: Sequence[SeqState], starts: Sequence[int], shared: Sequence[int]) -> DecodeStage:
        """This step's stage for `members`, advanced one position: reused when it matches, cut down
        when members left it (finished samples), else built from the pool."""
        stage = self.find(members, starts)
        if stage is None or stage.shared != list(shared):
            stage = self._subset(members, starts, shared)
        if stage is None:
            self.counters["decode_stage_builds"] += 1
            stage = DecodeStage.gather(self.pool_k, self.pool_v, self.block_size, members, starts, shared)
        stage.advance()
        self._next[stage.seq_ids] = stage
        return stage

    def _subset(self, members: Sequence[SeqState], starts: Sequence[int], shared: Sequence[int]) -> DecodeStage | None:
        first = members[0].seq_id
        for stage in self._stages.values():
            if first in stage.seq_ids and stage.shared == list(shared):
                rows = stage.rows_of([s.seq_id for s in members])
                if rows is not None:
                    cut = stage.select(rows)
                    self.counters["decode_stage_cuts"] += 1
                    return cut if cut.matches(members, starts) else None
        return None

    def end_step(self) -> None:
        """Retire the stages this step did not use; record the most memory stages held at once."""
        held = {t.data_ptr(): t.nbytes for st in (*self._stages.values(), *self._next.values())
                for t in st.tensors()}  # fmt: skip
        peak = max(self.counters["peak_decode_stage_mb"], sum(held.values()) / 2**20)
        self.counters["peak_decode_stage_mb"] = peak
        self._stages, self._next = self._next, {}

    def clear(self) -> None:
        self._stages, self._next = {}, {}
