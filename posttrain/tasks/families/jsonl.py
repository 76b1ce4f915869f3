"""JSONL datasets declared in YAML: GSM8K, MATH, generic `prompt`/`answer`, and code (HumanEval, MBPP, io).

One file is one domain, `<class>/jsonl/<name>`. Task ids are the record's own `id`, `task_id` or
`unique_id` when present, else the 0-based line index. Loading is tolerant: a malformed line (bad JSON,
invalid UTF-8, missing field, no extractable answer) is skipped and reported as `file:line: reason` in
`JsonlFamily.problems`; loading continues with the remaining lines. A file with no usable record, or a
missing file, is a `ConfigError`. Records are held in memory (datasets of this shape are small).
Code formats (`humaneval`, `mbpp`, `io`; record shapes in `posttrain.tasks.families.code.formats`) give
`code_tests` gold and class `code`; a code record without a reference solution has no `answer`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from posttrain.config import StrictModel
from posttrain.errors import ConfigError
from posttrain.tasks.families.code.formats import CODE_FORMATS
from posttrain.types import DomainSpec, Task
from posttrain.verify.configs import (
    CodeTestsConfig,
    MathConfig,
    NormalizedConfig,
    NumericConfig,
    VerifierConfig,
)
from posttrain.verify.extract import last_boxed

JsonlFormat = Literal["gsm8k", "math", "generic", "humaneval", "mbpp", "io"]
_ID_KEYS = ("id", "task_id", "unique_id")
_DEFAULT_CLASS: dict[str, str] = {"gsm8k": "math", "math": "math", "generic": "general", "humaneval": "code",
                                  "mbpp": "code", "io": "code"}  # fmt: skip


class JsonlConfig(StrictModel):
    kind: Literal["jsonl"] = "jsonl"
    """A JSONL dataset file."""
    path: Path
    """The .jsonl file; a relative path resolves against the directory of the YAML that declares it."""
    format: JsonlFormat = "generic"
    """Record shape: gsm8k (question, answer ending in '#### N'), math (problem, solution/answer), generic
    (prompt, answer), or a code shape graded by unit tests: humaneval, mbpp, io (see docs/code.md)."""
    name: str | None = None
    """Domain name; defaults to the file stem."""
    cls: str | None = None
    """Taxonomy class; defaults to math for gsm8k/math, general for generic and code for code shapes."""
    difficulty: float = 0.5
    """Numeric difficulty of every task in the file."""


@dataclass(frozen=True)
class _Record:
    line: int
    task_id: str
    prompt: str
    gold: Any
    answer: str | None


class JsonlFamily:
    """Serves the records of one JSONL file as tasks."""

    def __init__(self, config: JsonlConfig) -> None:
        self.config = config
        self.problems: list[str] = []
        self.records = self._load()
        name = config.name or config.path.stem
        cls = config.cls or _DEFAULT_CLASS[config.format]
        self.domain = DomainSpec(
            id=f"{cls}/jsonl/{name}",
            family_kind="jsonl",
            source=f"jsonl:{config.path}",
            verifier=self._format_verifier().kind,
            difficulty=config.difficulty,
            size=len(self.records),
            description=f"{config.format} records from {config.path}",
        )

    def domains(self) -> Sequence[DomainSpec]:
        return [self.domain]

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        rec = self.records[index]
        return Task(
            id=f"{domain.id}#{rec.task_id}",
            domain_id=domain.id,
            prompt=rec.prompt,
            gold=rec.gold,
            answer=rec.answer,
            difficulty=domain.difficulty,
            metadata={"line": rec.line},
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return self._format_verifier()

    def _format_verifier(self) -> VerifierConfig:
        """The verifier of this file's format."""
        if self.config.format in CODE_FORMATS:
            return CodeTestsConfig()
        if self.config.format == "gsm8k":
            return NumericConfig(extract="auto")
        if self.config.format == "math":
            return MathConfig()
        return NormalizedConfig(extract="auto")

    def _load(self) -> list[_Record]:
        path = self.config.path
        try:
            raw_lines = path.read_bytes().splitlines()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read JSONL dataset: {exc.strerror or exc}") from None
        records: list[_Record] = []
        seen: set[str] = set()
        for number, raw in enumerate(raw_lines, start=1):
            if not raw.strip():
                continue
            try:
                rec = _parse(raw, number - 1, self.config.format)
            except ValueError as exc:
                self.problems.append(f"{path}:{number}: {exc}")
                continue
            if rec.task_id in seen:
                self.problems.append(f"{path}:{number}: duplicate id {rec.task_id!r}")
                continue
            seen.add(rec.task_id)
            records.append(rec)
        if not records:
            detail = f" (first problem: {self.problems[0]})" if self.problems else ""
            raise ConfigError(f"{path}: no usable records{detail}")
        return records


def _parse(raw: bytes, index: int, fmt: str) -> _Record:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise ValueError("record is not a JSON object")
    ident = next((str(obj[k]) for k in _ID_KEYS if obj.get(k) is not None), str(index))
    prompt, gold, answer = _FIELDS[fmt](obj)
    return _Record(line=index + 1, task_id=ident, prompt=prompt, gold=gold, answer=answer)


def _require(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"missing field {key!r}")
    return str(value)


def _gsm8k(obj: dict[str, Any]) -> tuple[str, str, str]:
    question, solution = _require(obj, "question"), _require(obj, "answer")
    _, sep, final = solution.rpartition("####")
    if not sep or not final.strip():
        raise ValueError("answer has no '#### N' line")
    gold = final.strip().replace(",", "")
    return question, gold, f"{solution.rpartition('####')[0].strip()}\n#### {gold}"


def _math(obj: dict[str, Any]) -> tuple[str, str, str]:
    problem = _require(obj, "problem")
    gold = str(obj["answer"]).strip() if obj.get("answer") not in (None, "") else None
    if gold is None:
        gold = last_boxed(_require(obj, "solution"))
    if not gold:
        raise ValueError("no 'answer' field and no \\boxed{} in 'solution'")
    return problem, gold, f"The answer is $\\boxed{{{gold}}}$."


def _generic(obj: dict[str, Any]) -> tuple[str, str, str]:
    answer = _require(obj, "answer")
    return _require(obj, "prompt"), answer, answer


_FIELDS: dict[str, Callable[[dict[str, Any]], tuple[str, Any, str | None]]] = {
    "gsm8k": _gsm8k, "math": _math, "generic": _generic, **CODE_FORMATS,
}
