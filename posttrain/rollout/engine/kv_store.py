"""Tiered storage for KV evicted from the device pool: host memory first, then memory-mapped files.

An entry is the KV of a run of tokens, a tensor `[2, L, T, Hkv, D]` (keys, values). `put` places it in
host memory (pinned when the pool is on CUDA); when host memory exceeds its token budget the least
recently used entries spill to one memory-mapped file each under `disk_dir`. `take` returns an entry
bit for bit as it was put and forgets it. Guarantees: no entry is ever lost while the store holds it;
round trips are bitwise exact. Not here: deciding what to evict (the radix cache does that).
"""

from __future__ import annotations

import os
import tempfile
from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class _DiskEntry:
    path: str
    shape: tuple[int, ...]
    dtype: torch.dtype


class TieredKVStore:
    """Host-then-disk store of evicted KV runs, keyed by integer handles."""

    def __init__(self, host_capacity_tokens: int, disk_dir: str | None, pin_memory: bool = False) -> None:
        self.host_capacity_tokens = host_capacity_tokens
        self.pin_memory = pin_memory
        self._disk_dir = disk_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._host: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._disk: dict[int, _DiskEntry] = {}
        self._next_key = 0
        self.host_tokens = 0
        self.counters = {"spilled_to_disk_tokens": 0, "read_from_disk_tokens": 0,
                         "read_from_host_tokens": 0}

    @property
    def has_disk(self) -> bool:
        return self._disk_dir is not None

    def can_accept(self, num_tokens: int) -> bool:
        """Whether `num_tokens` more tokens fit (always, once a disk tier exists)."""
        return self.has_disk or self.host_tokens + num_tokens <= self.host_capacity_tokens

    def put(self, kv: torch.Tensor) -> int:
        """Store `kv` `[2, L, T, Hkv, D]` (already on the host); returns its handle."""
        key = self._next_key
        self._next_key += 1
        if self.pin_memory:
            kv = kv.pin_memory()
        self._host[key] = kv
        self.host_tokens += kv.shape[2]
        self._spill()
        return key

    def take(self, key: int) -> torch.Tensor:
        """The entry's tensor, removed from the store."""
        if key in self._host:
            kv = self._host.pop(key)
            self.host_tokens -= kv.shape[2]
            self.counters["read_from_host_tokens"] += kv.shape[2]
            return kv
        entry = self._disk.pop(key)
        numel = 1
        for size in entry.shape:
            numel *= size
        mapped = torch.from_file(entry.path, shared=False, size=numel, dtype=entry.dtype)
        kv = mapped.view(entry.shape).clone()
        os.unlink(entry.path)
        self.counters["read_from_disk_tokens"] += entry.shape[2]
        return kv

    def tier_of(self, key: int) -> str:
        return "host" if key in self._host else "disk"

    def drop(self, key: int) -> None:
        self.take(key)

    def clear(self) -> None:
        for key in list(self._host) + list(self._disk):
            self.drop(key)

    def _spill(self) -> None:
        while self.host_tokens > self.host_capacity_tokens and self._host and self.has_disk:
            key, kv = self._host.popitem(last=False)
            self.host_tokens -= kv.shape[2]
            self._disk[key] = self._write_file(key, kv)
            self.counters["spilled_to_disk_tokens"] += kv.shape[2]

    def _write_file(self, key: int, kv: torch.Tensor) -> _DiskEntry:
        path = os.path.join(self._directory(), f"kv-{key}.bin")
        mapped = torch.from_file(path, shared=True, size=kv.numel(), dtype=kv.dtype)
        mapped.copy_(kv.reshape(-1))
        del mapped
        return _DiskEntry(path, tuple(kv.shape), kv.dtype)

    def _directory(self) -> str:
        if self._tmp is None:
            assert self._disk_dir is not None
            os.makedirs(self._disk_dir, exist_ok=True)
            self._tmp = tempfile.TemporaryDirectory(prefix="kv-", dir=self._disk_dir)
        return self._tmp.name
