"""BFCL single-turn categories as domains `agent/bfcl/<category>`, graded by the AST checker.

Data: the question and `possible_answer` JSON-lines files shipped in the `bfcl-eval` package (installed
with `--no-deps`; only its data directory is read, none of its modules is imported). One category is
one domain; task ids are `agent/bfcl/<category>#<BFCL entry id>`. A task's prompt is chat messages: a
system message describing the offered functions as JSON schemas in `<tools></tools>` and asking for
`<tool_call>{"name": ..., "arguments": ...}</tool_call>` replies (the Hermes/Qwen convention), then the
entry's own turns. Gold (`task.gold`) holds the function docs and each expected call's allowed values;
`task.answer` writes the first allowed value of each parameter as tool calls (optional parameters whose
first allowed value is `""` are left out), or a plain refusal for irrelevance categories.

Grading: the `bfcl_ast` verifier (`posttrain.verify.bfcl_ast.BfclAstVerifier`).
Not here: multi-turn categories, Java/JavaScript categories, executable categories.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.envs.tools import render_tools_system_prompt
from posttrain.errors import ConfigError
from posttrain.types import ChatMessage, DomainSpec, Task
from posttrain.verify.bfcl_ast import Expect
from posttrain.verify.configs import BfclAstConfig, VerifierConfig
from posttrain.verify.tool_calls import format_tool_call

BfclCategory = Literal[
    "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
    "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance",
]
CATEGORIES: tuple[BfclCategory, ...] = get_args(BfclCategory)
EXPECT: dict[str, Expect] = {
    "simple_python": "one", "multiple": "one", "live_simple": "one", "live_multiple": "one",
    "parallel": "parallel", "parallel_multiple": "parallel", "live_parallel": "parallel",
    "live_parallel_multiple": "parallel", "irrelevance": "none", "live_irrelevance": "none",
}
PACKAGE = "bfcl_eval"
DATA_VERSION = "BFCL_v4"
GUIDANCE = "You can call the functions below when they help with the user's request; call none if none fits."
NO_CALL_ANSWER = "None of the available functions fits this request, so I will not call any."
_SCHEMA_TYPE = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


class BfclConfig(StrictModel):
    kind: Literal["bfcl"] = "bfcl"
    """BFCL single-turn categories from the installed `bfcl-eval` package (opt-in: not in the defaults)."""
    categories: list[BfclCategory] = Field(default_factory=lambda: list(CATEGORIES))
    """Which categories become domains."""
    data_dir: Path | None = None
    """The folder holding `BFCL_v4_<category>.json` and `possible_answer/`; default: the package's."""
    difficulty: float = Field(0.5, ge=0.0, le=1.0)
    """Numeric difficulty of every task."""


@dataclass(frozen=True)
class _Entry:
    bfcl_id: str
    messages: tuple[dict[str, Any], ...]
    functions: tuple[dict[str, Any], ...]
    calls: tuple[dict[str, Any], ...]


def package_data_dir() -> Path:
    """The `data` folder of the installed `bfcl-eval` package, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ConfigError("the bfcl family needs the `bfcl-eval` package (pip install --no-deps bfcl-eval)")
    return Path(locations[0]) / "data"


def to_json_schema(node: Any) -> Any:
    """A BFCL parameter schema in JSON-schema terms (dict -> object, float -> number, tuple -> array)."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: to_json_schema(value) for key, value in node.items()}
    if isinstance(node.get("type"), str):
        out["type"] = _SCHEMA_TYPE.get(node["type"], node["type"])
    return out


def tools_system_prompt(functions: Sequence[dict[str, Any]]) -> str:
    """The system-prompt section that offers `functions` as tools in the Hermes/Qwen style."""
    schemas = [{"type": "function", "function": {
        "name": f.get("name"), "description": f.get("description", ""),
        "parameters": to_json_schema(f.get("parameters", {"type": "object", "properties": {}})),
    }} for f in functions]  # fmt: skip
    return render_tools_system_prompt(schemas, guidance=GUIDANCE)


def gold_arguments(allowed: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """The first allowed value of each parameter, leaving out optional ones whose first value is `""`
    (omit); a required parameter takes its first non-empty value, or `""` when that is all BFCL allows."""
    out = {}
    for param, values in allowed.items():
        options = values if isinstance(values, list) else [values]
        if param in required:
            out[param] = _concrete(next((v for v in options if v != ""), ""))
        elif options and options[0] != "":
            out[param] = _concrete(options[0])
    return out


def _first_given(values: Any) -> bool:
    return not isinstance(values, list) or (bool(values) and values[0] != "")


def _concrete(alternative: Any) -> Any:
    """One concrete value from an allowed alternative: a dict maps keys to their own allowed lists."""
    if isinstance(alternative, dict):
        return {key: _concrete(values[0] if isinstance(values, list) else values)
                for key, values in alternative.items() if _first_given(values)}
    if isinstance(alternative, list):
        return [_concrete(item) for item in alternative]
    return alternative


def gold_response(calls: Sequence[dict[str, Any]], functions: Sequence[dict[str, Any]]) -> str:
    """The gold answer as tool calls (a refusal in plain text when no call is expected)."""
    if not calls:
        return NO_CALL_ANSWER
    required = {f.get("name"): (f.get("parameters") or {}).get("required") or [] for f in functions}
    return "\n".join(
        format_tool_call(call["name"], gold_arguments(call["allowed"], required.get(call["name"], [])))
        for call in calls
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read BFCL data: {exc.strerror or exc}") from None
    return [json.loads(line) for line in lines if line.strip()]


def load_category(data_dir: Path, category: str) -> list[_Entry]:
    """Every entry of one single-turn category, with its expected calls (none for irrelevance)."""
    questions = _read_jsonl(data_dir / f"{DATA_VERSION}_{category}.json")
    answers: dict[str, list[Any]] = {}
    if EXPECT[category] != "none":
        answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(data_dir / "possible_answer" / f"{DATA_VERSION}_{category}.json")}
    entries = []
    for q in questions:
        if EXPECT[category] != "none" and q["id"] not in answers:
            raise ConfigError(f"BFCL {category}: entry {q['id']} has no possible answer")
        calls = tuple({"name": name, "allowed": allowed} for gt in answers.get(q["id"], []) for name, allowed in gt.items())
        entries.append(_Entry(q["id"], tuple(q["question"][0]), tuple(q["function"]), calls))
    return entries


def _prompt(entry: _Entry) -> tuple[ChatMessage, ...]:
    own_system = [m["content"] for m in entry.messages if m["role"] == "system"]
    system = "\n\n".join([*own_system, tools_system_prompt(entry.functions)])
    turns = [ChatMessage(role=m["role"], content=m["content"]) for m in entry.messages if m["role"] != "system"]
    return (ChatMessage(role="system", content=system), *turns)


class BfclFamily:
    """One domain per BFCL single-turn category; tasks are the category's entries in file order."""

    def __init__(self, config: BfclConfig) -> None:
        self.config = config
        data_dir = config.data_dir or package_data_dir()
        self.entries: dict[str, list[_Entry]] = {c: load_category(data_dir, c) for c in dict.fromkeys(config.categories)}
        self._domains = [
            DomainSpec(
                id=f"agent/bfcl/{category}", family_kind="bfcl", source=f"bfcl:{data_dir}", verifier="bfcl_ast",
                difficulty=config.difficulty, size=len(entries), description=f"BFCL {category} ({EXPECT[category]})",
            )
            for category, entries in self.entries.items()
        ]

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        entry = self.entries[domain.path.domain][index]
        gold = {"functions": list(entry.functions), "calls": list(entry.calls)}
        return Task(
            id=f"{domain.id}#{entry.bfcl_id}", domain_id=domain.id, prompt=_prompt(entry), gold=gold,
            answer=gold_response(entry.calls, entry.functions), difficulty=domain.difficulty, metadata={"bfcl_id": entry.bfcl_id},
        )

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return BfclAstConfig(expect=EXPECT[domain.path.domain])
