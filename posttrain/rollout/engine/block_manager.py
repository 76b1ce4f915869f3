"""The paged KV block pool: reference-counted fixed-size blocks handed out from a free list.

Plain Python bookkeeping only; the tensors live in the runner. A block is a run of `block_size`
token slots; slot `block_id * block_size + offset` holds the KV of position `offset` (mod block size)
of every sequence that maps the block. Guarantees: a block returns to the free list exactly when its
reference count drops to zero; `allocate` never hands out a block that is still referenced.
Not here: who may write into a block (the scheduler copies a partly shared block before writing).
"""

from __future__ import annotations

from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """No free block is left; the caller must evict cached prefixes or preempt a sequence."""


class BlockPool:
    """A fixed number of KV blocks with reference counts."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref_counts = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))
        self.peak_used = 0

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def allocate(self) -> int:
        """A fresh block with reference count 1."""
        if not self._free:
            raise OutOfBlocks("KV block pool exhausted")
        block = self._free.pop()
        self.ref_counts[block] = 1
        self.peak_used = max(self.peak_used, self.num_used)
        return block

    def incref(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if self.ref_counts[block] <= 0:
                raise RuntimeError(f"incref of free block {block}")
            self.ref_counts[block] += 1

    def decref(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if self.ref_counts[block] <= 0:
                raise RuntimeError(f"decref of free block {block}")
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self._free.append(block)
