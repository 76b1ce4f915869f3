"""An out-of-tree domain family, loaded through `kind: plugin` in tests."""

from __future__ import annotations

from collections.abc import Sequence

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
