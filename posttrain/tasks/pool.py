"""The task pool: seeded sampling of tasks per domain and split, without materialising streams.

Split rule: a task is in `eval` iff the first 8 bytes of its content hash, as a fraction of 2**64, fall
below `eval_fraction` — a pure function of content, so the same prompt and gold can never sit in both
splits whatever its index, seed or source. Sampling draws indices from the caller's RNG and keeps tasks
of the requested split (rejection sampling for unbounded streams; a cached index list for finite
datasets). `eval_tasks` gives a fixed, ordered evaluation set per domain.
Not here: how many tasks each domain gets (the curriculum decides) or grading.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from posttrain.errors import ConfigError
from posttrain.tasks.registry import Domain, DomainRegistry, DomainsConfig
from posttrain.types import Task

Split = Literal["train", "eval"]

_ENUMERATE_MAX = 4096
"""Finite domains up to this size cache their split's index list; larger ones use rejection sampling."""

_MAX_DRAWS_PER_TASK = 200
"""Rejection-sampling budget: draws allowed per requested task before giving up on a domain."""


class TaskPool:
    """Random access to the tasks of every registered domain."""

    def __init__(self, registry: DomainRegistry, seed: int = 0, eval_fraction: float = 0.1) -> None:
        self.registry = registry
        self.seed = seed
        self.eval_fraction = eval_fraction
        self._catalogue: dict[str, _Catalogue] = {}
        """Finite domains only, enumerated once on first need."""
        self.num_generation_failures = 0

    @classmethod
    def from_config(cls, config: DomainsConfig) -> TaskPool:
        """The pool of a domains config: its registry, task seed and eval fraction."""
        return cls(DomainRegistry.from_config(config), seed=config.seed, eval_fraction=config.eval_fraction)

    def split_of(self, task: Task) -> Split:
        fraction = int((task.context_hash or task.content_hash)[:16], 16) / 2.0**64
        return "eval" if fraction < self.eval_fraction else "train"

    def task(self, domain_id: str, index: int) -> Task:
        domain = self.registry.get(domain_id)
        return domain.family.task(domain.spec, index, self.seed)

    def sample(self, domain_id: str, n: int, split: Split = "train", rng: random.Random | None = None) -> list[Task]:
        """`n` tasks of `split` drawn with replacement; raises ConfigError if the split is empty.

        Small finite domains draw from a cached list of their split's indices; large ones and streams
        use rejection sampling over indices. An index whose generation raises (a generator failing
        on a rare seed) is skipped within the same draw budget.
        """
        rng = rng or random.Random(self.seed)
        domain = self.registry.get(domain_id)
        size = domain.spec.size
        if domain.spec.context_size is not None:
            return self._sample_contexts(domain, n, split, rng)
        if size is not None and size <= _ENUMERATE_MAX:
            indices = self._indices(domain, split)
            if not indices:
                raise ConfigError(f"domain {domain_id!r} has no {split} tasks")
            return [domain.family.task(domain.spec, rng.choice(indices), self.seed) for _ in range(n)]
        tasks: list[Task] = []
        for _ in range(n * _MAX_DRAWS_PER_TASK):
            if len(tasks) == n:
                break
            task = self._try_task(domain, rng.randrange(size if size is not None else 2**31))
            if task is not None and self.split_of(task) == split:
                tasks.append(task)
        if len(tasks) < n:
            raise ConfigError(f"domain {domain_id!r}: could not draw {n} {split} tasks")
        return tasks

    def _sample_contexts(self, domain: Domain, n: int, split: Split, rng: random.Random) -> list[Task]:
        """Whole contexts at a time: a random context of `split` not drawn yet, then its tasks in random
        order, until n."""
        spec, context_size = domain.spec, domain.spec.context_size or 1
        num_contexts = -(-spec.size // context_size) if spec.size is not None else 2**31 // context_size
        tasks: list[Task] = []
        seen: set[int] = set()
        for attempt in range(n * _MAX_DRAWS_PER_TASK):
            if len(tasks) == n:
                return tasks
            start = rng.randrange(num_contexts) * context_size
            if start in seen and attempt < n * _MAX_DRAWS_PER_TASK // 2:
                continue  # a context twice in one draw only once the others seem used up
            seen.add(start)
            stop = start + context_size if spec.size is None else min(start + context_size, spec.size)
            for index in rng.sample(range(start, stop), stop - start):
                task = self._try_task(domain, index) if len(tasks) < n else None
                if task is not None and self.split_of(task) == split:
                    tasks.append(task)
                elif task is None or task.context_hash is not None:
                    break  # done, or the whole context is in the other split
        if len(tasks) < n:
            raise ConfigError(f"domain {spec.id!r}: could not draw {n} {split} tasks")
        return tasks

    def _try_task(self, domain: Domain, index: int) -> Task | None:
        try:
            return domain.family.task(domain.spec, index, self.seed)
        except Exception:  # a third-party generator failing on one seed must not stop training
            self.num_generation_failures += 1
            return None

    def eval_tasks(self, domain_id: str, n: int) -> list[Task]:
        """The first `n` distinct eval-split tasks in index order: a fixed evaluation set."""
        out: dict[str, Task] = {}
        for task in self.iter_split(domain_id, "eval"):
            out.setdefault(task.content_hash, task)
            if len(out) == n:
                break
        return list(out.values())

    def iter_split(self, domain_id: str, split: Split, max_index: int | None = None) -> Iterator[Task]:
        """Tasks of one split in index order (finite domains end; streams stop at `max_index`)."""
        domain = self.registry.get(domain_id)
        limit = domain.spec.size if domain.spec.size is not None else (max_index or 200_000)
        for index in range(limit):
            task = self._try_task(domain, index)
            if task is not None and self.split_of(task) == split:
                yield task

    def get(self, task_id: str) -> Task:
        """Look a task up by id (`<domain id>#<index or dataset id>`)."""
        domain_id, sep, key = task_id.rpartition("#")
        if not sep:
            raise ConfigError(f"task id {task_id!r} is not of the form '<domain id>#<key>'")
        domain = self.registry.get(domain_id)
        size = domain.spec.size
        if key.isdigit() and (size is None or int(key) < size):
            task = domain.family.task(domain.spec, int(key), self.seed)
            if task.id == task_id:
                return task
        index = self._id_index(domain).get(task_id)
        if index is None:
            raise ConfigError(f"unknown task id {task_id!r}")
        return domain.family.task(domain.spec, index, self.seed)

    def counts(self) -> dict[str, int | None]:
        """Number of distinct task indices per domain (None: unbounded stream)."""
        return {spec.id: spec.size for spec in self.registry.specs()}

    def _indices(self, domain: Domain, split: Split) -> list[int]:
        return self._entries(domain).by_split[split]

    def _id_index(self, domain: Domain) -> dict[str, int]:
        return self._entries(domain).by_id

    def _entries(self, domain: Domain) -> _Catalogue:
        spec = domain.spec
        if spec.id not in self._catalogue:
            catalogue = _Catalogue(by_id={}, by_split={"train": [], "eval": []})
            for index in range(spec.size or 0):
                task = domain.family.task(spec, index, self.seed)
                catalogue.by_id[task.id] = index
                catalogue.by_split[self.split_of(task)].append(index)
            self._catalogue[spec.id] = catalogue
        return self._catalogue[spec.id]


@dataclass(frozen=True)
class _Catalogue:
    """A finite domain enumerated once: index by task id, and indices per split."""

    by_id: dict[str, int]
    by_split: dict[str, list[int]]
