"""Continuous batching under a KV block budget, with chunked prefill, prefix reuse and preemption.

Each step takes, in admission order, one token from every decoding sequence, then prompt chunks from
sequences still prefilling until `max_prefill_tokens` is used, then admits waiting sequences (longest
cached prefix first mapped, the rest computed). Admission matches the prompt (all but its last token,
whose logits are needed) in the radix cache, reloads offloaded parts, maps fully matched blocks
shared and copies a partly matched last block (copy-on-write). A waiting sequence that shares more
of its prompt with a sequence still prefilling than that one took from the cache waits for it, so a
shared prompt is computed once; the rest of a GRPO group then joins in one step. When blocks run out the scheduler first evicts unlocked cached prefixes (to host/disk when
tiers exist), then preempts the most recently admitted sequence: its computed KV goes into the cache
(from where it is reloaded or recomputed) and it returns to the head of the queue.
Under a length-dependent RoPE variant (dynamic NTK, longrope) a prefix is matched and cached in the
tree of its prompt's frequency key, and only up to the tokens computed with those frequencies
(`rope_keys`), so reused KV is always what the sequence would have computed itself.
Guarantees: a sequence holds at most one partly filled block beyond its tokens (waste < 1 block);
requests finish independently. Plain Python; tensor work goes through the `KVMover`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from posttrain.rollout.engine.block_manager import BlockPool
from posttrain.rollout.engine.radix import Node, RadixCache
from posttrain.rollout.engine.rope_keys import RopeKeys
from posttrain.rollout.engine.seq_state import SeqState, SeqStatus


@dataclass
class Chunk:
    """`num_tokens` tokens of `seq` starting at position `start`, computed in one step."""

    seq: SeqState
    start: int
    num_tokens: int

    @property
    def needs_logits(self) -> bool:
        return self.start + self.num_tokens == self.seq.num_tokens


class Scheduler:
    """Decides what each model step computes (see module docstring)."""

    def __init__(self, pool: BlockPool, radix: RadixCache, max_num_seqs: int,
                 max_prefill_tokens: int | None, prefix_caching: bool, rope_keys: RopeKeys | None = None) -> None:
        self.pool = pool
        self.rope_keys = rope_keys or RopeKeys()
        self.radix = radix
        self.max_num_seqs = max_num_seqs
        self.max_prefill_tokens = max_prefill_tokens
        self.prefix_caching = prefix_caching
        self.waiting: deque[SeqState] = deque()
        self.running: list[SeqState] = []
        self.counters = {"prompt_tokens": 0, "cached_tokens": 0, "computed_tokens": 0,
                         "computed_prompt_tokens": 0, "preemptions": 0, "max_waste_slots": 0}

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: SeqState) -> None:
        self.counters["prompt_tokens"] += seq.prompt_len
        self.waiting.append(seq)

    # ---- one step -------------------------------------------------------------------------
    def schedule(self) -> list[Chunk]:
        chunks: list[Chunk] = []
        budget = self.max_prefill_tokens if self.max_prefill_tokens is not None else 1 << 62
        for seq in list(self.running):
            if seq.status is not SeqStatus.RUNNING:
                continue
            n = 1 if seq.num_uncomputed == 1 else min(seq.num_uncomputed, budget)
            if n <= 0 or not self._reserve(seq, seq.num_computed + n):
                continue
            chunks.append(Chunk(seq, seq.num_computed, n))
            if not seq.is_decoding:
                budget -= n
        self._admit(chunks, budget)
        self._check_waste()
        return chunks

    def complete(self, chunks: list[Chunk]) -> list[SeqState]:
        """Account a finished step (tokens already appended by the engine); returns finished seqs."""
        finished = []
        for chunk in chunks:
            seq = chunk.seq
            seq.num_computed += chunk.num_tokens
            self.counters["computed_tokens"] += chunk.num_tokens
            if chunk.start < seq.prompt_len:
                self.counters["computed_prompt_tokens"] += min(seq.num_computed, seq.prompt_len) - chunk.start
            if self.prefix_caching and not seq.prompt_cached and seq.num_computed >= seq.prompt_len:
                self._cache_computed(seq)
                seq.prompt_cached = True
            if seq.is_done:
                self._release(seq, SeqStatus.FINISHED)
                finished.append(seq)
        return finished

    # ---- admission ------------------------------------------------------------------------
    def _admit(self, chunks: list[Chunk], budget: int) -> None:
        i = 0
        while i < len(self.waiting) and len(self.running) < self.max_num_seqs and budget > 0:
            seq = self.waiting[i]
            if self._should_wait(seq):
                i += 1
                continue
            chunk = self._try_admit(seq, budget)
            if chunk is None:
                return
            del self.waiting[i]
            chunks.append(chunk)
            budget -= chunk.num_tokens

    def _should_wait(self, seq: SeqState) -> bool:
        if not self.prefix_caching:
            return False
        head = seq.token_ids[: self.pool.block_size]
        key = self.rope_keys.prompt_key(seq.prompt_len)
        return any(r.token_ids[: self.pool.block_size] == head and self._will_cache_for(r, seq)
                   and self.rope_keys.prompt_key(r.prompt_len) == key for r in self.running)

    @staticmethod
    def _will_cache_for(r: SeqState, seq: SeqState) -> bool:
        """Whether prefilling `r` is about to cache prompt tokens beyond its reused ones that `seq` can match.

        `seq` matches all but its last token, so a sample of a group whose prompt is already cached
        (it reused all but the last token) is nothing to wait for.
        """
        m = r.num_reused
        if r.prompt_cached or m >= r.prompt_len or m + 1 >= seq.num_tokens:
            return False
        return seq.token_ids[: m + 1] == r.token_ids[: m + 1]

    def _try_admit(self, seq: SeqState, budget: int) -> Chunk | None:
        node = self._match_and_lock(seq)
        bs = self.pool.block_size
        while True:
            matched = node.end
            n = min(seq.num_tokens - matched, budget)
            # admit only when the whole sequence fits next to the running ones (or nothing runs)
            target = seq.num_tokens + 1 if self.running else matched + n
            needed = -(-target // bs) - matched // bs
            if self.pool.num_free < needed:
                self.radix.evict(needed)
            if self.pool.num_free >= needed:
                break
            if self.running or node.parent is None:
                self.radix.unlock(node)
                return None
            # a cached path split by many branches may hold more blocks than it saves: use less of it
            node = self._relock(node, node.parent)
        path = self.radix.path_blocks(node) if matched else []
        table = [path[(i + 1) * bs - 1] for i in range(matched // bs)]
        self.pool.incref(table)
        if matched % bs:
            block = self.pool.allocate()
            self.radix.mover.copy_block_prefix(path[matched - 1], block, matched % bs)
            table.append(block)
        seq.block_table, seq.num_computed, seq.lock_node, seq.num_reused = table, matched, node, matched
        seq.status = SeqStatus.RUNNING
        self.counters["cached_tokens"] += min(matched, seq.prompt_len)
        self.running.append(seq)
        self._grow(seq, matched + n)
        return Chunk(seq, matched, n)

    def _match_and_lock(self, seq: SeqState) -> Node:
        """Lock the longest cached prefix of all but the last token, brought back onto the device."""
        if not self.prefix_caching:
            self.radix.lock(self.radix.root)
            return self.radix.root
        limit = self.rope_keys.cacheable(seq.prompt_len, seq.num_tokens - 1)
        node, _ = self.radix.match(seq.token_ids[:limit], self.rope_keys.prompt_key(seq.prompt_len))
        self.radix.lock(node)
        return self._relock(node, self.radix.reload(node))

    def _relock(self, old: Node, new: Node) -> Node:
        if new is not old:
            self.radix.lock(new)
            self.radix.unlock(old)
        return new

    # ---- blocks ---------------------------------------------------------------------------
    def _reserve(self, seq: SeqState, num_tokens: int) -> bool:
        """Make `seq` own blocks for `num_tokens` tokens, evicting or preempting; False if it was preempted."""
        needed = -(-num_tokens // self.pool.block_size) - len(seq.block_table)
        while self.pool.num_free < needed:
            self.radix.evict(needed)
            if self.pool.num_free >= needed:
                break
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        self._grow(seq, num_tokens)
        return True

    def _grow(self, seq: SeqState, num_tokens: int) -> None:
        while len(seq.block_table) * self.pool.block_size < num_tokens:
            seq.block_table.append(self.pool.allocate())

    def _preempt(self, seq: SeqState) -> None:
        self._release(seq, SeqStatus.WAITING)
        seq.num_computed = 0
        seq.prompt_cached = False
        self.waiting.appendleft(seq)
        self.counters["preemptions"] += 1

    def _release(self, seq: SeqState, status: SeqStatus) -> None:
        if self.prefix_caching and seq.num_computed > 0:
            self._cache_computed(seq)
        self.pool.decref(seq.block_table)
        self.radix.unlock(seq.lock_node)
        seq.block_table, seq.lock_node, seq.status = [], None, status
        self.running.remove(seq)

    def _cache_computed(self, seq: SeqState) -> None:
        bs = self.pool.block_size
        count = self.rope_keys.cacheable(seq.prompt_len, seq.num_computed)
        blocks = [seq.block_table[p // bs] for p in range(count)]
        node = self.radix.insert(seq.token_ids[:count], blocks, self.rope_keys.prompt_key(seq.prompt_len))
        self.radix.lock(node)
        self.radix.unlock(seq.lock_node)
        seq.lock_node = node

    def _check_waste(self) -> None:
        bs = self.pool.block_size
        for seq in self.running:
            waste = len(seq.block_table) * bs - seq.num_tokens
            self.counters["max_waste_slots"] = max(self.counters["max_waste_slots"], waste)
