"""Radix cache bookkeeping: token-level matching, splits, reference counts, locks and eviction."""

from __future__ import annotations

import mmap
import os
from typing import Any

import pytest

from posttrain.rollout.engine.block_manager import BlockPool, OutOfBlocks
from posttrain.rollout.engine.radix import RadixCache


class FakeMover:
    """Records KV moves instead of doing them."""

    def __init__(self) -> None:
        self.copies: list[tuple[int, int, int]] = []

    def copy_block_prefix(self, src_block: int, dst_block: int, num_slots: int) -> None:
        self.copies.append((src_block, dst_block, num_slots))

    def read_slots(self, slots: list[int]) -> Any:
        return list(slots)

    def write_slots(self, slots: list[int], kv: Any) -> None:
        pass


def owned(pool: BlockPool, count: int) -> list[int]:
    return [pool.allocate() for _ in range(count)]


def per_position(blocks: list[int], length: int, block_size: int = 4) -> list[int]:
    return [blocks[p // block_size] for p in range(length)]


def test_pool_frees_a_block_when_its_last_reference_goes() -> None:
    pool = BlockPool(2, 4)
    a = pool.allocate()
    pool.incref([a])
    pool.decref([a])
    assert pool.num_free == 1
    pool.decref([a])
    assert pool.num_free == 2


def test_pool_raises_when_exhausted() -> None:
    pool = BlockPool(1, 4)
    pool.allocate()
    with pytest.raises(OutOfBlocks):
        pool.allocate()


def test_match_is_token_level_and_splits_the_node() -> None:
    pool = BlockPool(8, 4)
    radix = RadixCache(pool, FakeMover(), None)
    blocks = owned(pool, 3)
    radix.insert(list(range(10)), per_position(blocks, 10))
    node, matched = radix.match([0, 1, 2, 3, 4, 5, 99])
    assert matched == 6
    assert node.end == 6
    assert radix.path_blocks(node) == per_position(blocks, 6)


def test_split_node_sharing_a_block_holds_two_references() -> None:
    pool = BlockPool(8, 4)
    radix = RadixCache(pool, FakeMover(), None)
    blocks = owned(pool, 3)
    radix.insert(list(range(10)), per_position(blocks, 10))
    pool.decref(blocks)  # the sequence is gone; only the tree holds them
    radix.match([0, 1, 2, 3, 4, 5, 99])  # split at 6, inside block 1
    assert pool.ref_counts[blocks[1]] == 2


def test_eviction_skips_locked_nodes_and_frees_the_rest() -> None:
    pool = BlockPool(4, 4)
    radix = RadixCache(pool, FakeMover(), None)
    a, b = owned(pool, 2), owned(pool, 2)
    kept = radix.insert([1] * 8, per_position(a, 8))
    radix.insert([2] * 8, per_position(b, 8))
    pool.decref(a + b)
    radix.lock(kept)
    radix.evict(2)
    assert pool.num_free == 2
    assert radix.match([1] * 8)[1] == 8
    assert radix.match([2] * 8)[1] == 0


def test_reset_releases_every_block() -> None:
    pool = BlockPool(4, 4)
    radix = RadixCache(pool, FakeMover(), None)
    blocks = owned(pool, 2)
    radix.insert(list(range(8)), per_position(blocks, 8))
    pool.decref(blocks)
    radix.reset(version=1)
    assert pool.num_free == 4
    assert radix.match(list(range(8)))[1] == 0


def _vm_flags(address: int) -> list[str]:
    """The `VmFlags` of the mapping of this process holding `address` (from /proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(part, 16) for part in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError("no mapping holds the address")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps") or not hasattr(mmap, "MADV_NOHUGEPAGE"),
                    reason="needs Linux's /proc/self/smaps and MADV_NOHUGEPAGE")
def test_cpu_kv_pool_is_zero_and_on_small_pages() -> None:
    """The CPU pool is zeros, writable, and mapped with small pages (`nh`): a huge page faulted in by
    a decode write cost milliseconds; see `runner.pool_zeros`."""
    import torch

    from posttrain.rollout.engine.runner import pool_zeros

    pool = pool_zeros((3, 4096, 2, 64), torch.float32, torch.device("cpu"))
    assert pool.shape == (3, 4096, 2, 64) and pool.is_contiguous() and not pool.any()
    pool[1, 7] = 1.0
    assert pool.sum().item() == 128.0
    assert "nh" in _vm_flags(pool.data_ptr())
    view = pool[2]
    del pool
    view += 2.0  # a view keeps the mapping alive
    assert view.sum().item() == 2.0 * 4096 * 2 * 64
