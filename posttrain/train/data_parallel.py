"""Data parallelism for `PolicyTrainer`: which rows and micro-batches this rank computes, and the sums
across ranks that make a group's optimizer step the one a single process would take.

Each rank holds the same weights and optimizer state. For every optimizer step the trainer splits the
step's micro-batches round-robin over the ranks; every micro-batch's loss is already scaled by the
normalizer of the whole mini-batch (`algo.losses.Normalizer`), so the sum of the ranks' accumulated
gradients is the single-process gradient, summed in another order. `sum_gradients` all-reduces them
(one flat tensor, gloo or NCCL, whatever `torch.distributed` was initialised with); every rank then
clips and steps identically. Metrics are merged the same way (`merge_sums`, `gather_rows`).

Guarantees: with one rank nothing is communicated and every result is the single-process one, bit for
bit; with several, weights stay identical across ranks and differ from one process only by float
summation order. The caller initialises the process group (`posttrain.dist.learner_group`).
Not here: tensor or pipeline parallelism, sharded optimizer states.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class DataParallel:
    """This process's place in a data-parallel learner group."""

    rank: int
    world_size: int

    def share(self, items: Sequence[T]) -> list[T]:
        """The items this rank computes: every `world_size`-th, from `rank`."""
        return list(items[self.rank :: self.world_size])

    def sum_gradients(self, params: Iterable[Any]) -> None:
        """Replace every parameter's gradient by its sum over the ranks (a missing one counts as zero)."""
        import torch
        import torch.distributed as dist

        params = list(params)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        offset = 0
        for param in params:
            param.grad = flat[offset : offset + param.numel()].view_as(param).clone()
            offset += param.numel()

    def gather(self, value: T) -> list[T]:
        """`value` of every rank, in rank order."""
        import torch.distributed as dist

        values: list[Any] = [None] * self.world_size
        dist.all_gather_object(values, value)
        return values

    def merge_sums(self, sums: dict[str, float]) -> dict[str, float]:
        """Per key, the sum over the ranks (a key some ranks lack counts as zero there)."""
        merged: dict[str, float] = {}
        for part in self.gather(dict(sums)):
            for key, value in part.items():
                merged[key] = merged.get(key, 0.0) + value
        return merged

    def gather_rows(self, rows: dict[int, T]) -> dict[int, T]:
        """The union of every rank's {row index: value}."""
        merged: dict[int, T] = {}
        for part in self.gather(rows):
            merged.update(part)
        return merged
