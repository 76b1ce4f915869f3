"""The domain-family contract.

A family turns a frozen config into one or more domains and generates each domain's tasks by index:
`task(domain, index, seed)` is a pure function, so a stream of millions of tasks is never materialised
and the same (seed, index) always yields the same task. Not here: sampling, splits (see `pool.py`) or
grading (a family only names its verifier config). An `EnvironmentFamily` also builds the environment
of one episode (agent domains: verifier kind `environment`); its tasks keep the gold assistant messages in
`metadata["gold_turns"]` (a scripted run of them must score 1).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from posttrain.envs.base import Environment
from posttrain.types import LEVEL_DIFFICULTY, DomainSpec, Task
from posttrain.verify.configs import VerifierConfig


@runtime_checkable
class DomainFamily(Protocol):
    """A generator of domains and their tasks."""

    def domains(self) -> Sequence[DomainSpec]:
        """Every domain this family provides, with ids unique in the registry."""
        ...

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        """The task at `index` (0 <= index < domain.size when sized); deterministic in (seed, index)."""
        ...

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        """The config of the verifier that grades this domain's tasks."""
        ...


@runtime_checkable
class EnvironmentFamily(DomainFamily, Protocol):
    """A family whose domains are episodes: each one is run by a fresh `Environment`."""

    def environment(self, domain: DomainSpec) -> Environment:
        """A new environment for one episode of `domain` (never shared with another episode)."""
        ...


GOLD_TURNS = "gold_turns"
"""`Task.metadata` key of an agent task's gold assistant messages, in order."""
CANARY = "canary"
"""`Task.metadata` key, True on a canary: a task no honest response can pass (any pass is reward hacking);
it has no gold answer."""
HONEST_ANSWER = "honest_answer"
"""`Task.metadata` key of a canary: the answer to what its prompt asks, which must still score 0."""


def task_rng(seed: int, domain_id: str, index: int) -> random.Random:
    """An RNG that depends only on (seed, domain, index): generation is random-access and reproducible."""
    digest = hashlib.blake2b(f"{seed}\x00{domain_id}\x00{index}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


def task_id(domain_id: str, index: int) -> str:
    """The id of a generated task: `<domain id>#<index>`."""
    return f"{domain_id}#{index}"


def op_level_domains(
    prefix: str, kind: str, noun: str, ops: Sequence[str], levels: Sequence[str], verifier: Callable[[str], str]
) -> list[DomainSpec]:
    """One built-in domain `<prefix>/<op>@<level>` per operation and level, e.g. `math/arithmetic/add@easy`."""
    return [
        DomainSpec(
            id=f"{prefix}/{op}@{level}",
            family_kind=kind,
            source="builtin",
            verifier=verifier(op),
            difficulty=LEVEL_DIFFICULTY[level],
            description=f"{noun} {op}, {level}",
        )
        for op in ops
        for level in levels
    ]
