"""An out-of-tree domain family, loaded through `kind: plugin` in tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrain.tasks.base import task_id, task_rng
from posttrain.types import DomainSpec, Score, Task
from posttrain.verify.configs import ExactConfig, VerifierConfig


class EchoFamily:
    """`plugin/echo/word`: repeat a random word."""

    def __init__(self, alphabet: str = "abc") -> None:
        self.alphabet = alphabet

    def domains(self) -> Sequence[DomainSpec]:
        return [DomainSpec(id="plugin/echo/word", family_kind="plugin", source="plugin", verifier="exact")]

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        rng = task_rng(seed, domain.id, index)
        word = "".join(rng.choice(self.alphabet) for _ in range(8))
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=f"Say {word}", gold=word, answer=word)

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return ExactConfig()


def make_echo(alphabet: str = "abc") -> EchoFamily:
    return EchoFamily(alphabet)


class StartsWithDigit:
    """Rewards any response whose first visible character is a digit: trivially learnable."""

    def score(self, task: Task, response: str) -> Score:
        text = response.strip()
        return Score.correct() if text[:1].isdigit() else Score.wrong()


def make_starts_with_digit() -> StartsWithDigit:
    return StartsWithDigit()


class KvFamily:
    """`plugin/example/kv`: the example key-value environment (`posttrain.envs.example`) as an agent domain."""

    def __init__(self, failure_rate: float = 0.0) -> None:
        self.failure_rate = failure_rate

    def domains(self) -> Sequence[DomainSpec]:
        return [DomainSpec(id="plugin/example/kv", family_kind="plugin", source="plugin", verifier="environment")]

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        from posttrain.envs.base import run_policy
        from posttrain.envs.example import kv_gold_policy, make_kv_task
        from posttrain.tasks.base import GOLD_TURNS

        task = make_kv_task(seed * 100_003 + index).model_copy(update={"id": task_id(domain.id, index),
                                                                       "domain_id": domain.id})  # fmt: skip
        transcript, _ = run_policy(self.environment(domain), task, kv_gold_policy(task))
        turns = [m["content"] for m in transcript if m["role"] == "assistant"]
        return task.model_copy(update={"metadata": {**task.metadata, GOLD_TURNS: turns}})

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        from posttrain.verify.configs import EnvironmentConfig

        return EnvironmentConfig()

    def environment(self, domain: DomainSpec) -> Any:
        from posttrain.envs.example import kv_env

        return kv_env(self.failure_rate)


def make_kv(failure_rate: float = 0.0) -> KvFamily:
    return KvFamily(failure_rate)


class DocumentsFamily:
    """`plugin/docs/lookup`: four questions per generated document (`context_size` 4), split by document."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size

    def domains(self) -> Sequence[DomainSpec]:
        return [DomainSpec(id="plugin/docs/lookup", family_kind="plugin", source="plugin", verifier="exact",
                           size=self.size, context_size=4)]  # fmt: skip

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        document = index // 4
        rng = task_rng(seed, domain.id, document)
        facts = [str(rng.randrange(1000)) for _ in range(4)]
        text = " ".join(f"fact{i}={value}" for i, value in enumerate(facts))
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=f"{text}\nfact{index % 4}?",
                    gold=facts[index % 4], answer=facts[index % 4], metadata={"document": document},
                    context_hash=f"{document:064x}"[::-1])  # fmt: skip

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return ExactConfig()


def make_documents(size: int | None = None) -> DocumentsFamily:
    return DocumentsFamily(size)
