"""Token-level radix tree over cached KV, with locks, LRU eviction and tiered offload.

Each node holds a run of tokens and, while on the device, the KV block of every one of its tokens
(position p lives in slot p % block_size of that block). Matching is token-level: a hit may end in
the middle of a node (the node is split there) and in the middle of a block (the caller copies that
block before writing, i.e. copy-on-write). Invariant: the block recorded for token p of a path also
holds valid KV for the path's earlier tokens of the same block, so the block of the last matched
token of each block index is the one to map. The tree owns one reference on every distinct block of
every device node. Nodes locked by running sequences are never evicted. Evicted nodes go to a
`TieredKVStore` (host, then disk) when one is configured and come back on a prefix hit; otherwise
they are dropped. The tree is for one weight version: `reset` forgets everything, so a version bump
yields zero hits. There is one tree per RoPE frequency key (`rope_keys`; a single tree, key 0, for
static RoPE variants): KV is only matched against KV computed with the same frequencies. Plain Python; KV bytes move through the `KVMover` the runner provides.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from posttrain.rollout.engine.block_manager import BlockPool
from posttrain.rollout.engine.rope_keys import STATIC_KEY


class KVMover(Protocol):
    """The tensor side of KV management (implemented by the model runner)."""

    def copy_block_prefix(self, src_block: int, dst_block: int, num_slots: int) -> None: ...

    def read_slots(self, slots: list[int]) -> Any: ...

    def write_slots(self, slots: list[int], kv: Any) -> None: ...


class KVStore(Protocol):
    def can_accept(self, num_tokens: int) -> bool: ...

    def put(self, kv: Any) -> int: ...

    def take(self, key: int) -> Any: ...

    def drop(self, key: int) -> None: ...

    def clear(self) -> None: ...


class Node:
    """A run of tokens starting at position `start`; `blocks[i]` holds token i while on the device."""

    __slots__ = ("tokens", "blocks", "start", "parent", "children", "lock", "last_used", "stored")

    def __init__(self, tokens: list[int], blocks: list[int], start: int, parent: Node | None) -> None:
        self.tokens = tokens
        self.blocks = blocks
        self.start = start
        self.parent = parent
        self.children: dict[int, Node] = {}
        self.lock = 0
        self.last_used = 0
        self.stored: int | None = None

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    @property
    def is_on_device(self) -> bool:
        return self.stored is None


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class RadixCache:
    """Prefix index of one weight version (see module docstring)."""

    def __init__(self, pool: BlockPool, mover: KVMover, store: KVStore | None) -> None:
        self.pool = pool
        self.mover = mover
        self.store = store
        self.roots: dict[int, Node] = {STATIC_KEY: Node([], [], 0, None)}
        self.version = 0
        self._tick = 0
        self.counters = {"evicted_tokens": 0, "offloaded_tokens": 0, "offloaded_blocks": 0,
                         "reloaded_tokens": 0, "reloaded_blocks": 0}

    # ---- lookup and insertion -------------------------------------------------------------
    @property
    def root(self) -> Node:
        """The root of the static-key tree."""
        return self.roots[STATIC_KEY]

    def root_of(self, key: int) -> Node:
        """The root of the tree of frequency key `key` (created empty when missing)."""
        return self.roots.setdefault(key, Node([], [], 0, None))

    def match(self, tokens: Sequence[int], key: int = STATIC_KEY) -> tuple[Node, int]:
        """Deepest node whose path is a prefix of `tokens` (split so the match ends at its end)."""
        node, pos = self.root_of(key), 0
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None:
                break
            k = common_prefix_len(child.tokens, tokens[pos : pos + len(child.tokens)])
            if k < len(child.tokens):
                child = self._split(child, k)
            node, pos = child, pos + k
        self._touch(node)
        return node, pos

    def insert(self, tokens: Sequence[int], blocks: Sequence[int], key: int = STATIC_KEY) -> Node:
        """Record that `blocks[p]` holds the KV of `tokens[p]`; returns the node ending at len(tokens)."""
        node, pos = self.root_of(key), 0
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None:
                child = Node(list(tokens[pos:]), list(blocks[pos:]), pos, node)
                self.pool.incref(set(child.blocks))
                node.children[tokens[pos]] = child
                node, pos = child, len(tokens)
                break
            k = common_prefix_len(child.tokens, tokens[pos : pos + len(child.tokens)])
            if k < len(child.tokens):
                child = self._split(child, k)
            if child.is_on_device:
                self._adopt(child, list(blocks[pos : pos + k]))
            else:
                self._promote(child, list(blocks[pos : pos + k]))
            node, pos = child, pos + k
        self._touch(node)
        return node

    def path_blocks(self, node: Node) -> list[int]:
        """Block of every position on the path root -> node (all nodes must be on the device)."""
        chain = list(self._path(node))
        out: list[int] = []
        for n in chain:
            out.extend(n.blocks)
        return out

    # ---- locks ----------------------------------------------------------------------------
    def lock(self, node: Node) -> None:
        for n in self._path(node):
            n.lock += 1

    def unlock(self, node: Node) -> None:
        for n in self._path(node):
            n.lock -= 1

    # ---- tiers ----------------------------------------------------------------------------
    def reload(self, node: Node) -> Node:
        """Bring offloaded nodes on the (locked) path back; returns the deepest node now on device."""
        last = next(iter(self._path(node)))
        for n in self._path(node):
            if n.parent is None:
                continue
            if not n.is_on_device and not self._reload_node(n):
                return last
            last = n
        return last

    def _reload_node(self, node: Node) -> bool:
        bs = self.pool.block_size
        first, last = node.start // bs, (node.end - 1) // bs
        needed = last - first + 1
        if self.pool.num_free < needed:
            self.evict(needed)
        if self.pool.num_free < needed:
            return False
        assert self.store is not None and node.stored is not None
        new_blocks = [self.pool.allocate() for _ in range(needed)]
        if node.start % bs:
            assert node.parent is not None and node.parent.blocks
            self.mover.copy_block_prefix(node.parent.blocks[-1], new_blocks[0], node.start % bs)
        node.blocks = [new_blocks[p // bs - first] for p in range(node.start, node.end)]
        self.mover.write_slots(self._slots(node), self.store.take(node.stored))
        node.stored = None
        self.counters["reloaded_tokens"] += len(node.tokens)
        self.counters["reloaded_blocks"] += needed
        return True

    def evict(self, num_free_target: int) -> None:
        """Offload (or drop) least recently used unlocked nodes until the pool has enough free blocks."""
        while self.pool.num_free < num_free_target:
            candidates = [n for n in self._nodes() if self._is_evictable(n)]
            if not candidates:
                return
            candidates.sort(key=lambda n: n.last_used)
            for n in candidates:
                self._evict_node(n)
                if self.pool.num_free >= num_free_target:
                    return

    def _is_evictable(self, node: Node) -> bool:
        if node.parent is None or node.lock > 0 or not node.is_on_device:
            return False
        if any(c.is_on_device for c in node.children.values()):
            return False
        can_offload = self.store is not None and self.store.can_accept(len(node.tokens))
        return can_offload or not node.children

    def _evict_node(self, node: Node) -> None:
        if self.store is not None and self.store.can_accept(len(node.tokens)):
            node.stored = self.store.put(self.mover.read_slots(self._slots(node)))
            self.counters["offloaded_tokens"] += len(node.tokens)
            self.counters["offloaded_blocks"] += len(set(node.blocks))
        else:
            assert node.parent is not None
            del node.parent.children[node.tokens[0]]
            self.counters["evicted_tokens"] += len(node.tokens)
        self.pool.decref(set(node.blocks))
        node.blocks = []

    def _adopt(self, node: Node, blocks: list[int]) -> None:
        """Point a node at the inserting sequence's copy of the same KV.

        Branch points leave a path's tokens spread over partly filled copied blocks; taking the
        newest sequence's blocks lets the older copies go, so a cached path never holds more blocks
        than the sequence that last used it.
        """
        if blocks != node.blocks:
            self.pool.incref(set(blocks))
            self.pool.decref(set(node.blocks))
            node.blocks = blocks

    def _promote(self, node: Node, blocks: list[int]) -> None:
        assert self.store is not None and node.stored is not None
        self.store.drop(node.stored)
        node.stored = None
        node.blocks = blocks
        self.pool.incref(set(blocks))

    # ---- housekeeping ---------------------------------------------------------------------
    def reset(self, version: int) -> None:
        """Forget every cached prefix (a new weight version makes all KV stale)."""
        for n in self._nodes():
            if n.parent is None:
                continue
            if n.is_on_device:
                self.pool.decref(set(n.blocks))
            elif self.store is not None and n.stored is not None:
                self.store.drop(n.stored)
        self.roots = {STATIC_KEY: Node([], [], 0, None)}
        self.version = version

    def _split(self, node: Node, k: int) -> Node:
        parent = node.parent
        assert parent is not None and 0 < k < len(node.tokens)
        head = Node(node.tokens[:k], node.blocks[:k], node.start, parent)
        head.lock, head.last_used = node.lock, node.last_used
        parent.children[head.tokens[0]] = head
        head.children[node.tokens[k]] = node
        node.tokens, node.blocks, node.start, node.parent = node.tokens[k:], node.blocks[k:], node.start + k, head
        if node.is_on_device:
            self.pool.incref(set(head.blocks) & set(node.blocks))
        else:
            assert self.store is not None and node.stored is not None
            kv = self.store.take(node.stored)  # [2, L, T, Hkv, D]
            head.stored = self.store.put(kv[:, :, :k].clone())
            node.stored = self.store.put(kv[:, :, k:].clone())
        return head

    def _slots(self, node: Node) -> list[int]:
        bs = self.pool.block_size
        return [b * bs + p % bs for p, b in zip(range(node.start, node.end), node.blocks, strict=True)]

    def _touch(self, node: Node) -> None:
        self._tick += 1
        for n in self._path(node):
            n.last_used = self._tick

    def _path(self, node: Node) -> Iterator[Node]:
        chain = []
        cur: Node | None = node
        while cur is not None:
            chain.append(cur)
            cur = cur.parent
        return reversed(chain)

    def _nodes(self) -> Iterator[Node]:
        stack = list(self.roots.values())
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children.values())
