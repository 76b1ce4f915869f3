"""Decode staging: contiguous copies of the KV that decoding sequences attend, extended step by step.

A decode step reads the whole context of every decoding sequence. Gathering that context from its
scattered blocks at every step copies it (per layer) before attention reads it again, so a decode
step moved about three times the bytes of the KV it needs, and on small models that traffic was most
of the step. A `DecodeStage` keeps its members' own KV in contiguous tensors `[L, R, Hkv, cap, D]`,
one row per member, and appends each step's new position next to the pool write, so a step reads
every cached key once. Members that map the same leading blocks (a GRPO group, agent episodes under
one system prompt, questions about one document) keep those blocks once, as a staged prefix
(`[L, Hkv, P, D]`), and attend them apart (on CPU the flash kernel, which never materialises the
`[rows, P]` scores and returns their log-sum-exps; elsewhere a matmul pair); each row's own part and
its prefix are merged by their log-sum-exps (cascade attention), which equals attention over the
concatenation. Short prefixes of one length (`stage_prefix.BANK_BYTES`) are stacked once into a
bank and attended in one call, each prefix's rows padded to the largest group; the rows' own parts
go through the same kernel in one call with the rows' mask.

One stage holds members of any number of prefixes (and members with none), so a step's attention is
one kernel call over all its rows' own parts plus one per prefix length (or per long prefix), not a
dozen operations per GRPO group and layer. Stages are keyed by size class (`_size_class`: the power
of two at or above the positions a member can still reach), so a member never shares its row width
with one that needs more than twice its room.

Membership changes cost only the rows that change (slot rows). Live rows are always `0..n-1`; a
step's members map to rows in any order (queries are permuted into row order and outputs back). A
member that leaves frees its row; a member that joins gathers only its own KV from the pool into a
free row, or into a new row at the end (rows grow by doubling). A row left free after the joins is
filled by moving the last live row into it (one row's copy), so attention never reads free rows.
Positions grow by doubling too, sized first to what the members can reach within their token
budgets; when at most a quarter of the rows are live the stage shrinks to half (memory stays within
a constant factor of the live members' context).

Validity: a staged position is a copy of KV that never changes while its sequence keeps the same
block table object (positions below `num_computed` are never rewritten; a preempted or readmitted
sequence gets a new table). A row is kept only while its member has the table it was staged from,
the same prefix length, and is exactly one position further, else the row is dropped and gathered
again. A staged prefix is trusted across steps only while some member mapping it stays from the
previous step (it holds those blocks, so they cannot be freed and refilled), else it is gathered
again; a stage with no staying member is built afresh. `StageCache` drops every stage and prefix a
step does not use. The pool stays the source of truth; nothing is written back.
Not here: which sequences share a prefix (the runner decides), sparse attention modes (not staged).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from posttrain.rollout.engine.model import CPU_FLASH_ATTENTION as _CPU_FLASH
from posttrain.rollout.engine.seq_state import SeqState
from posttrain.rollout.engine.stage_prefix import (
    NEG_INF,
    Bank,
    PrefixBatch,
    PrefixKV,
    plan_batches,
    prefix_part,
)

MIN_ROWS = 4


def _capacity(num_positions: int, most: int | None = None) -> int:
    """Room for `num_positions` plus growth: a power of two, so growing is amortised O(1) per step,
    but no more than `most` (the positions the members can still reach) when that is enough."""
    cap = max(64, 1 << num_positions.bit_length())
    return cap if most is None else max(num_positions, min(cap, most))


def _rows_for(n: int) -> int:
    return max(MIN_ROWS, 1 << max(0, n - 1).bit_length())


def _size_class(most: int) -> int:
    """The stage a member with room for `most` own positions joins: the power of two at or above it."""
    return 1 << max(0, most - 1).bit_length()


def _room(seq: SeqState, first: int) -> int:
    """Own positions (from `first`) the member can reach within its token budget."""
    return seq.prompt_len + seq.params.max_new_tokens - first


class DecodeStage:
    """Staged own KV of decoding sequences, each attending its staged prefix apart (see module doc)."""

    def __init__(self, pool_k: torch.Tensor, block_size: int, rows: int, cap: int) -> None:
        self.block_size = block_size
        num_layers, _, hkv, d = pool_k.shape
        self.k = pool_k.new_zeros(num_layers, rows, hkv, cap, d)  # zeros: finite under the -inf bias
        self.v = pool_k.new_zeros(num_layers, rows, hkv, cap, d)
        self.bias = pool_k.new_full((rows, cap), NEG_INF)  # 0 where staged, -inf elsewhere
        self.seq_ids: list[int] = []  # per live row
        self.tables: list[list[int]] = []  # the members' block table objects, to detect preemption
        self.firsts: list[int] = []  # first own position per row (the positions of its prefix)
        self.lengths: list[int] = []  # staged own positions per row
        self.member_rows = torch.empty(0, dtype=torch.long, device=pool_k.device)  # this step's row per member
        self._rows: list[int] = []
        self._order: torch.Tensor | None = None  # member index per row; None when rows are in member order
        self._write_index = torch.empty(0, dtype=torch.long, device=pool_k.device)
        self._width = 0
        self._plan: list[PrefixBatch] = []  # this step's prefixes, batched by length
        self._banks: dict[tuple[int, ...], Bank] = {}  # stacked prefixes of one length, by the prefixes' ids
        self._plain_rows = 0  # rows without a prefix (last in plan order)
        self._unplan: torch.Tensor | None = None  # plan order -> row order; None when equal

    @classmethod
    def gather(cls, pool_k: torch.Tensor, pool_v: torch.Tensor, block_size: int, members: Sequence[SeqState],
               starts: Sequence[int], firsts: Sequence[int]) -> DecodeStage:
        """Stage each member's own KV (from its position in `firsts` to the one before `starts`)."""
        need = max(p - f for p, f in zip(starts, firsts, strict=True)) + 1
        most = max(_room(s, f) for s, f in zip(members, firsts, strict=True))
        stage = cls(pool_k, block_size, _rows_for(len(members)), _capacity(need, most))
        stage.update(pool_k, pool_v, members, starts, firsts)
        return stage

    def tensors(self) -> list[torch.Tensor]:
        """The tensors this stage holds (for memory accounting; prefixes are the cache's, stacked
        copies of them the stage's)."""
        return [self.k, self.v, self.bias] + [t for bank in self._banks.values() for t in (bank.k, bank.v)]

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    @property
    def num_rows(self) -> int:
        return len(self.seq_ids)

    def staying(self, members: Sequence[SeqState], starts: Sequence[int],
                firsts: Sequence[int] | None = None) -> dict[int, int]:
        """Member index -> row of the members whose rows hold exactly their context before `starts`
        (from `firsts`, when given, else from wherever the row starts)."""
        row_of = {sid: r for r, sid in enumerate(self.seq_ids)}
        out = {}
        for b, (s, p) in enumerate(zip(members, starts, strict=True)):
            r = row_of.get(s.seq_id)
            if r is None or s.block_table is not self.tables[r] or p != self.firsts[r] + self.lengths[r]:
                continue
            if firsts is None or firsts[b] == self.firsts[r]:
                out[b] = r
        return out

    def matches(self, members: Sequence[SeqState], starts: Sequence[int]) -> bool:
        """Whether this stage holds exactly these members' contexts before their positions in `starts`."""
        return len(members) == self.num_rows and len(self.staying(members, starts)) == len(members)

    def update(self, pool_k: torch.Tensor, pool_v: torch.Tensor, members: Sequence[SeqState],
               starts: Sequence[int], firsts: Sequence[int]) -> tuple[int, int]:
        """Make rows `0..n-1` hold exactly `members` before `starts`: rows of members gone (or stale)
        are freed, joining members' KV is gathered into free rows. Returns (joined, left)."""
        keep = self.staying(members, starts, firsts)  # member -> row
        left = self.num_rows - len(keep)
        n = len(members)
        if left == 0 and n == len(keep) and [keep[b] for b in range(n)] == self._rows:
            return 0, 0  # the same members in the same rows and order, one position further
        keep = self._compact(keep, n)
        self._resize(n, members, starts, firsts)
        used = set(keep.values())
        free = iter(r for r in range(n) if r not in used)
        row = [keep[b] if b in keep else next(free) for b in range(n)]
        self.seq_ids, self.tables, self.firsts, self.lengths = [0] * n, [[]] * n, [0] * n, [0] * n
        for s, p, f, r in zip(members, starts, firsts, row, strict=True):
            self.seq_ids[r], self.tables[r], self.firsts[r], self.lengths[r] = s.seq_id, s.block_table, f, p - f
        joining = [b for b in range(n) if b not in keep]
        if joining:
            self._fill(pool_k, pool_v, [members[b] for b in joining], [row[b] for b in joining])
        self._set_order(row)
        return len(joining), left

    def _compact(self, keep: dict[int, int], n: int) -> dict[int, int]:
        """Move the staying rows at `n` or above into free rows below `n` (one row's copy each)."""
        kept = set(keep.values())
        high = sorted(r for r in kept if r >= n)
        if not high:
            return keep
        low = [r for r in range(n) if r not in kept][: len(high)]
        self._move(high, low)
        moved = dict(zip(high, low, strict=True))
        return {b: moved.get(r, r) for b, r in keep.items()}

    def _set_order(self, row: list[int]) -> None:
        dev = self.k.device
        self._rows = row
        self.member_rows = torch.tensor(row, dtype=torch.long, device=dev)
        if row == list(range(len(row))):
            self._order = None
            return
        order = [0] * len(row)
        for b, r in enumerate(row):
            order[r] = b
        self._order = torch.tensor(order, dtype=torch.long, device=dev)

    def plan(self, prefixes: Sequence[PrefixKV | None]) -> None:
        """Set the staged prefix each member (member order) attends apart this step; None for none.
        Prefixes of one length are attended in one kernel call (`stage_prefix.plan_batches`)."""
        by_row: list[PrefixKV | None] = [None] * len(prefixes)
        for b, r in enumerate(self._rows):
            by_row[r] = prefixes[b]
        groups: dict[int, tuple[PrefixKV, list[int]]] = {}
        plain = []
        for r, kv in enumerate(by_row):
            if kv is None:
                plain.append(r)
            else:
                groups.setdefault(id(kv[0]), (kv, []))[1].append(r)
        self._plan, self._banks = plan_batches(list(groups.values()), self._banks, len(self._rows), self.k.device)
        self._plain_rows = len(plain)
        order = [r for batch in self._plan for r in batch.rows] + plain
        if order == list(range(len(order))):
            self._unplan = None
        else:
            unplan = [0] * len(order)
            for i, r in enumerate(order):
                unplan[r] = i
            self._unplan = torch.tensor(unplan, dtype=torch.long, device=self.k.device)

    def advance(self) -> None:
        """Make room for one more position per member; the step's forward writes it (`write`)."""
        if max(self.lengths) >= self.capacity:
            self._realloc(self.k.shape[1], _capacity(max(self.lengths) + 1))  # past the budget: doubling
        dev = self.k.device
        hkv, cap = self.k.shape[2], self.capacity
        rows = self.member_rows
        rel = torch.tensor(self.lengths, dtype=torch.long, device=dev)[rows]  # [B], member order
        self.bias[rows, rel] = 0.0
        heads = torch.arange(hkv, device=dev)
        # flat row of (row r, head h, position rel) in a layer's [R*Hkv*cap, D] view
        self._write_index = ((rows[:, None] * hkv + heads) * cap + rel[:, None]).flatten()
        self.lengths = [n + 1 for n in self.lengths]
        self._width = max(self.lengths)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Stage this step's keys/values `[B, Hkv, D]` (member order) of layer `layer`."""
        d = k.shape[-1]
        self.k[layer].view(-1, d).index_copy_(0, self._write_index, k.reshape(-1, d))
        self.v[layer].view(-1, d).index_copy_(0, self._write_index, v.reshape(-1, d))

    def attend(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        """Exact attention of decode queries `[B, H, D]` (member order) over the staged context."""
        if self._order is not None:
            q = q[self._order]  # row order
        b, h, d = q.shape
        hkv = self.k.shape[2]
        width = self._width
        qg = q.view(b, hkv, h // hkv, d)  # [B, Hkv, G, D]; the kernels apply the 1/sqrt(D) scale
        scale = d**-0.5
        k, v = self.k[layer, :b, :, :width], self.v[layer, :b, :, :width]  # [B, Hkv, S, D]
        bias = self.bias[:b, None, None, :width]  # [B, 1, 1, S]
        if _CPU_FLASH is not None and q.device.type == "cpu":  # the query heads of a KV head as its query rows
            out_own, lse = _CPU_FLASH(qg, k, v, 0.0, False, attn_mask=bias, scale=scale)  # [B, Hkv, G, D], [B, Hkv, G]
            lse_own = lse[..., None]
        else:
            scores = torch.matmul(qg, k.transpose(-1, -2)) * scale + bias  # [B, Hkv, G, S]
            out_own = torch.matmul(torch.softmax(scores, -1), v)
            lse_own = torch.logsumexp(scores, -1, keepdim=True)
        if self._plan:  # own part and prefix, merged by their shares exp(lse_part - lse) of the whole
            out_pre, lse_pre = prefix_part(self._plan, layer, qg, self._plain_rows, self._unplan, scale)
            out_own = torch.lerp(out_own, out_pre, torch.sigmoid(lse_pre - lse_own))
        out = out_own.reshape(b, h, d)
        return out if self._order is None else out[self.member_rows]

    # ---- rows ------------------------------------------------------------------------------
    def _resize(self, n: int, members: Sequence[SeqState], starts: Sequence[int], firsts: Sequence[int]) -> None:
        """Rows and positions for `n` members at `starts`: grown by doubling, rows halved when at most
        a quarter are live (the live rows already lie below `n`)."""
        rows, cap = self.k.shape[1], self.capacity
        need = max(p - f for p, f in zip(starts, firsts, strict=True)) + 1
        most = max(_room(s, f) for s, f in zip(members, firsts, strict=True))
        new_rows = _rows_for(n) if n > rows else _rows_for(2 * n) if rows > MIN_ROWS and 4 * n <= rows else rows
        new_cap = _capacity(need, most if most >= need else None) if need > cap else cap
        if (new_rows, new_cap) != (rows, cap):
            self._realloc(new_rows, new_cap)

    def _realloc(self, rows: int, cap: int) -> None:
        n = min(rows, self.k.shape[1])
        keep = min(cap, self.capacity)
        k, v, bias = self.k, self.v, self.bias
        self.k = k.new_zeros(k.shape[0], rows, k.shape[2], cap, k.shape[4])
        self.v = v.new_zeros(v.shape[0], rows, v.shape[2], cap, v.shape[4])
        self.bias = bias.new_full((rows, cap), NEG_INF)
        self.k[:, :n, :, :keep] = k[:, :n, :, :keep]
        self.v[:, :n, :, :keep] = v[:, :n, :, :keep]
        self.bias[:n, :keep] = bias[:n, :keep]

    def _move(self, src: list[int], dst: list[int]) -> None:
        """Copy whole rows `src` onto rows `dst` (KV and bias)."""
        dev = self.k.device
        s = torch.tensor(src, dtype=torch.long, device=dev)
        t = torch.tensor(dst, dtype=torch.long, device=dev)
        self.k[:, t] = self.k[:, s]
        self.v[:, t] = self.v[:, s]
        self.bias[t] = self.bias[s]

    def _fill(self, pool_k: torch.Tensor, pool_v: torch.Tensor, joiners: list[SeqState], rows: list[int]) -> None:
        """Gather each joiner's own positions (from its first to its staged length) into its row."""
        dev, bs = self.k.device, self.block_size
        lengths = [self.lengths[r] for r in rows]
        width = max(lengths)
        own = torch.zeros(len(joiners), width, dtype=torch.long)  # unstaged: slot 0, finite, masked
        for j, (seq, r) in enumerate(zip(joiners, rows, strict=True)):
            positions = torch.arange(self.firsts[r], self.firsts[r] + self.lengths[r])
            table = torch.tensor(seq.block_table, dtype=torch.long)
            own[j, : self.lengths[r]] = table[positions // bs] * bs + positions % bs
        index = torch.tensor(rows, dtype=torch.long, device=dev)
        cap = self.capacity
        staged = torch.arange(cap)[None, :] < torch.tensor(lengths)[:, None]  # [J, cap]
        self.bias[index] = torch.zeros(staged.shape, dtype=self.bias.dtype).masked_fill_(~staged, NEG_INF).to(dev)
        num_layers, _, hkv, d = pool_k.shape
        shape = (num_layers, len(joiners), width, hkv, d)
        own = own.flatten().to(dev)
        if width:
            self.k[:, index, :, :width] = pool_k[:, own].view(shape).transpose(2, 3)
            self.v[:, index, :, :width] = pool_v[:, own].view(shape).transpose(2, 3)


class StageCache:
    """This step's stages (keyed by size class) and staged prefixes (keyed by their blocks); a stage or
    prefix no step uses is dropped."""

    def __init__(self, pool_k: torch.Tensor, pool_v: torch.Tensor, block_size: int) -> None:
        self.pool_k, self.pool_v, self.block_size = pool_k, pool_v, block_size
        self._stages: dict[int, DecodeStage] = {}
        self._next: dict[int, DecodeStage] = {}
        self._prefixes: dict[tuple[int, ...], PrefixKV] = {}
        self._next_prefixes: dict[tuple[int, ...], PrefixKV] = {}
        self.counters = {"decode_stage_builds": 0, "decode_stage_cuts": 0, "decode_stage_joins": 0,
                         "decode_prefix_builds": 0, "peak_decode_stage_mb": 0.0}

    def find(self, members: Sequence[SeqState], starts: Sequence[int]) -> DecodeStage | None:
        """The stage holding exactly these members at these positions, or None."""
        for stage in (*self._next.values(), *self._stages.values()):
            if stage.matches(members, starts):
                return stage
        return None

    def prefixes(self, first_block: int) -> list[list[int]]:
        """Blocks of the live staged prefixes that start with `first_block`, longest first."""
        found = [list(key) for key in self._prefixes if key and key[0] == first_block]
        return sorted(found, key=len, reverse=True)

    def use(self, members: Sequence[SeqState], starts: Sequence[int], shared: Sequence[int]) -> DecodeStage:
        """The stage of members that all map `shared` and fall in one size class (see `assign`)."""
        placed = self.assign(members, starts, [shared] * len(members))
        assert len(placed) == 1, "members of several size classes"
        return placed[0][0]

    def assign(self, members: Sequence[SeqState], starts: Sequence[int],
               shared: Sequence[Sequence[int]]) -> list[tuple[DecodeStage, list[int]]]:
        """This step's stages for every exact-decode member (member i attends `shared[i]` apart, none
        when empty), each advanced one position, with the indices of its members in the order its
        `write` and `attend` take them."""
        bs = self.block_size
        firsts = [len(x) * bs for x in shared]
        size_of: dict[int, int] = {}  # member -> size class of its stage
        for size, stage in self._stages.items():  # a member staying keeps its stage, whatever its room
            for b in stage.staying(members, starts, firsts):
                size_of.setdefault(b, size)
        stays = set(size_of.values())
        trusted = {tuple(shared[b]) for b in size_of if shared[b]}
        classes: dict[int, list[int]] = {}
        for i, (seq, first) in enumerate(zip(members, firsts, strict=True)):
            size = size_of.get(i) or _size_class(max(_room(seq, first), starts[i] - first + 1))
            classes.setdefault(size, []).append(i)
        placed = []
        for size, idx in classes.items():
            stage = self._place(size, [members[i] for i in idx], [starts[i] for i in idx], [firsts[i] for i in idx],
                                size in stays)
            stage.plan([self._prefix(tuple(shared[i]), trusted) if shared[i] else None for i in idx])
            stage.advance()
            placed.append((stage, idx))
        return placed

    def _place(self, size: int, members: list[SeqState], starts: list[int], firsts: list[int],
               anyone_stays: bool) -> DecodeStage:
        stage = self._stages.get(size) if anyone_stays else None
        if stage is None:
            self.counters["decode_stage_builds"] += 1
            stage = DecodeStage.gather(self.pool_k, self.pool_v, self.block_size, members, starts, firsts)
        else:
            joined, left = stage.update(self.pool_k, self.pool_v, members, starts, firsts)
            self.counters["decode_stage_joins"] += joined
            self.counters["decode_stage_cuts"] += left
        self._next[size] = stage
        return stage

    def _prefix(self, key: tuple[int, ...], trusted: set[tuple[int, ...]]) -> PrefixKV:
        """The staged KV of blocks `key`: last step's while a member mapping it stays, else gathered."""
        kv = self._next_prefixes.get(key)
        if kv is None:
            kv = self._prefixes.get(key) if key in trusted else None
        if kv is None:
            self.counters["decode_prefix_builds"] += 1
            bs = self.block_size
            blocks = torch.tensor(key, dtype=torch.long)
            slots = (blocks[:, None] * bs + torch.arange(bs)).flatten().to(self.pool_k.device)
            # [L, P, Hkv, D] -> [L, Hkv, P, D]: each head's keys contiguous for one kernel call
            kv = (self.pool_k[:, slots].transpose(1, 2).contiguous(), self.pool_v[:, slots].transpose(1, 2).contiguous())
        self._next_prefixes[key] = kv
        return kv

    def end_step(self) -> None:
        """Retire the stages and prefixes this step did not use; record the most memory they held at once."""
        held = {t.data_ptr(): t.nbytes for st in (*self._stages.values(), *self._next.values()) for t in st.tensors()}
        for kv in (*self._prefixes.values(), *self._next_prefixes.values()):
            held.update((t.data_ptr(), t.nbytes) for t in kv)
        peak = max(self.counters["peak_decode_stage_mb"], sum(held.values()) / 2**20)
        self.counters["peak_decode_stage_mb"] = peak
        self._stages, self._next = self._next, {}
        self._prefixes, self._next_prefixes = self._next_prefixes, {}

    def clear(self) -> None:
        self._stages, self._next = {}, {}
        self._prefixes, self._next_prefixes = {}, {}
