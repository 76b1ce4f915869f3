"""BFCL multi-turn categories as agent domains `agent/bfcl_multi/<category>`: an episode per BFCL entry.

Data: the `bfcl-eval` package's `BFCL_v4_multi_turn_<kind>.json` entries, their `possible_answer`
ground truth (per user turn, a list of calls written as Python) and `multi_turn_func_doc/*.json` (the
function docs, given to the model as tool schemas). Task ids are `agent/bfcl_multi/<category>#<BFCL id>`.

The episode (`BfclMultiEnv`, a `ToolEnv` inside): the entry's user turns are fed in order (an assistant
message without a tool call ends a turn); the entry's `involved_classes` are instantiated per episode
with its `initial_config` (`bfcl_apis`: in this process or in a sandbox of the episode's own); the tools
are the classes' documented methods. `miss_func` entries hold functions back: BFCL marks the turn that
adds them (`missed_function`, an empty user turn) and we then add them to the tool set and tell the
model so, with their schemas, as BFCL's prompting handler does. `miss_param` and `long_context` run as
the data is (long context loads the classes' long-context scenarios).

Grading, as BFCL's multi-turn checker: the ground-truth calls of each turn are replayed on fresh
instances in this process; after each turn whose ground truth is not empty the episode must have made at
least one call in that turn, every instance's public state must equal the replay's, and the replay's
results for the turn must all appear among the episode's results so far (as a multiset; BFCL compares
against every turn up to this one). Turns with empty ground truth are not checked (as in BFCL) unless
never reached. `passed` = every checked turn holds; `completion` = share of checked turns that hold;
reward = 1 if passed else completion. Gold (`metadata["gold_turns"]`): per turn, the ground-truth calls
as tool calls (in messages of at most 16 calls), then a short text that ends the turn.

Not here: the single-turn categories (`bfcl.py`), BFCL's executable categories, memory and web search.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.envs.base import EpisodeLimits, Message, Observation, StepResult, ToolEnv
from posttrain.envs.tools import Tool, ToolSet
from posttrain.errors import ConfigError
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.families.bfcl import DATA_VERSION, package_data_dir, to_json_schema
from posttrain.tasks.families.bfcl_apis import ApiSession, Isolation, ProcessApis, open_apis
from posttrain.tasks.families.bfcl_runner import CLASS_MODULES, PACKAGE
from posttrain.types import DomainSpec, Score, Task
from posttrain.verify.configs import EnvironmentConfig, VerifierConfig
from posttrain.verify.tool_calls import MAX_CALLS, format_tool_call

BfclMultiCategory = Literal["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                            "multi_turn_long_context"]  # fmt: skip
CATEGORIES: tuple[BfclMultiCategory, ...] = get_args(BfclMultiCategory)
SYSTEM = ("You operate simulated services (a file system, messaging, trading, travel, a vehicle and "
          "others) for the user through function calls. Do what each request asks; when a request cannot "
          "be done with the functions you have, or lacks information you need, say so instead of "
          "guessing.")  # fmt: skip
TURN_DONE = "Done."
REVEAL = "I have added more functions you can call from now on:\n<tools>\n{listing}\n</tools>\nWhat about now?"


class BfclMultiConfig(StrictModel):
    kind: Literal["bfcl_multi"] = "bfcl_multi"
    """BFCL multi-turn categories from the installed `bfcl-eval` package (opt-in: not in the defaults)."""
    categories: list[BfclMultiCategory] = Field(default_factory=lambda: list(CATEGORIES))
    """Which categories become domains."""
    data_dir: Path | None = None
    """The folder holding `BFCL_v4_<category>.json`, `possible_answer/` and `multi_turn_func_doc/`."""
    isolation: Isolation = "sandbox"
    """Where the simulated APIs run: a sandbox per episode, or this process (fast; gold measurement)."""
    difficulty: float = Field(0.8, ge=0.0, le=1.0)
    """Numeric difficulty of every task."""
    max_turns: int = Field(64, ge=1)
    """Assistant messages per episode."""
    max_tool_calls: int = Field(128, ge=1)
    """Tool calls per episode."""


@dataclass(frozen=True)
class Entry:
    bfcl_id: str
    turns: tuple[str | None, ...]
    """Each user turn's text; None for a turn that only adds held-back functions."""
    ground_truth: tuple[tuple[str, ...], ...]
    classes: tuple[str, ...]
    config: dict[str, Any]
    holdout: dict[int, tuple[str, ...]]
    """Turn index -> names of the functions added at that turn."""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read BFCL data: {exc.strerror or exc}") from None


def load_category(data_dir: Path, category: str) -> list[Entry]:
    answers = {a["id"]: a["ground_truth"] for a in _read_jsonl(data_dir / "possible_answer" / f"{DATA_VERSION}_{category}.json")}
    entries = []
    for q in _read_jsonl(data_dir / f"{DATA_VERSION}_{category}.json"):
        if q["id"] not in answers:
            raise ConfigError(f"BFCL {category}: entry {q['id']} has no possible answer")
        turns = tuple("\n\n".join(m["content"] for m in turn) if turn else None for turn in q["question"])
        holdout = {int(k): tuple(v) for k, v in q.get("missed_function", {}).items()}
        entries.append(Entry(q["id"], turns, tuple(tuple(t) for t in answers[q["id"]]), tuple(q["involved_classes"]),
                             q.get("initial_config", {}), holdout))  # fmt: skip
    return entries


@cache
def function_docs(data_dir: Path, class_name: str) -> tuple[dict[str, Any], ...]:
    return tuple(_read_jsonl(data_dir / "multi_turn_func_doc" / f"{CLASS_MODULES[class_name]}.json"))


def tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    parameters = to_json_schema(doc.get("parameters") or {"type": "object", "properties": {}})
    return {"type": "function", "function": {"name": doc["name"], "description": doc.get("description", ""),
                                             "parameters": parameters}}  # fmt: skip


@cache
def _signature(class_name: str, method: str) -> inspect.Signature:
    cls = getattr(importlib.import_module(f"{PACKAGE}.{CLASS_MODULES[class_name]}"), class_name)
    return inspect.signature(getattr(cls, method))


def parse_call(text: str, classes: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call `f(a, b=1)` as (name, keyword arguments), positional ones named by signature."""
    node = ast.parse(text.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    name = node.func.id
    owner = next((c for c in reversed(classes) if hasattr(_class(c), name)), None)
    if owner is None:
        raise ValueError(f"no involved class has {name!r}")
    params = [p for p in _signature(owner, name).parameters if p != "self"]
    arguments = {params[i]: ast.literal_eval(arg) for i, arg in enumerate(node.args)}
    arguments.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None})
    return name, arguments


@cache
def _class(class_name: str) -> type:
    return getattr(importlib.import_module(f"{PACKAGE}.{CLASS_MODULES[class_name]}"), class_name)  # type: ignore[no-any-return]


def gold_turns(entry: Entry) -> list[str]:
    """Per user turn: its ground-truth calls in messages of at most `MAX_CALLS` calls (none when empty),
    then `TURN_DONE`."""
    messages = []
    for calls in entry.ground_truth:
        blocks = [format_tool_call(*parse_call(c, entry.classes)) for c in calls]
        messages += ["\n".join(blocks[i : i + MAX_CALLS]) for i in range(0, len(blocks), MAX_CALLS)]
        messages.append(TURN_DONE)
    return messages


def _turn_text(entry: Entry, index: int, docs: Sequence[dict[str, Any]]) -> str:
    text = entry.turns[index]
    if text is not None:
        return text
    added = [d for d in docs if d["name"] in entry.holdout.get(index, ())]
    return REVEAL.format(listing="\n".join(json.dumps(tool_schema(d), ensure_ascii=False) for d in added))


def entry_docs(data_dir: Path, entry: Entry) -> list[dict[str, Any]]:
    """The function docs of the entry's classes, one per name (the first wins)."""
    docs: dict[str, dict[str, Any]] = {}
    for class_name in entry.classes:
        for doc in function_docs(data_dir, class_name):
            docs.setdefault(doc["name"], doc)
    return list(docs.values())


@dataclass
class Episode:
    """One episode's record: the APIs, every executed call's result by turn, the state after each turn."""

    gold: dict[str, Any]
    apis: ApiSession
    turn: int = 0
    results: list[tuple[int, str]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)


class ApiError(RuntimeError):
    """A simulated API call that failed (its BFCL error text is the message)."""


def episode_tools(episode: Episode, docs: Sequence[dict[str, Any]], timeout_s: float) -> list[Tool]:
    def make(name: str) -> Any:
        def call(**arguments: Any) -> str:
            ok, text = episode.apis.call(name, arguments)
            episode.results.append((episode.turn, text))
            if not ok:
                raise ApiError(text)
            return text

        return call

    return [Tool(make(d["name"]), tool_schema(d), timeout_s) for d in docs]


def _contains(have: Sequence[str], wanted: Sequence[str]) -> bool:
    return not Counter(wanted) - Counter(have)


def grade_episode(episode: Episode, transcript: list[Message]) -> Score:
    """BFCL's multi-turn check, turn by turn (see the module docstring)."""
    gold = episode.gold
    replay = ProcessApis(gold["classes"], gold["config"], gold["long_context"])
    verdicts: list[str] = []
    for index, calls in enumerate(gold["ground_truth"]):
        expected = [replay.call(*parse_call(c, gold["classes"]))[1] for c in calls]
        if index >= len(episode.states):
            verdicts.append("not reached")
        elif not calls:
            verdicts.append("not checked")
        elif not any(turn == index for turn, _ in episode.results):
            verdicts.append("fail: no call")
        elif episode.states[index] != replay.state():
            verdicts.append("fail: state")
        elif not _contains([text for turn, text in episode.results if turn <= index], expected):
            verdicts.append("fail: results")
        else:
            verdicts.append("pass")
    checked = [v for v in verdicts if v != "not checked"]
    completion = sum(v == "pass" for v in checked) / len(checked) if checked else 1.0
    passed = completion == 1.0
    return Score(reward=1.0 if passed else completion, passed=passed,
                 details={"completion": completion, "turn_verdicts": verdicts})  # fmt: skip


class BfclMultiEnv:
    """One BFCL multi-turn episode: a `ToolEnv` over the entry's APIs, with turns marked and tools revealed."""

    def __init__(self, data_dir: Path, isolation: Isolation, limits: EpisodeLimits) -> None:
        self.data_dir, self.isolation, self.limits = data_dir, isolation, limits
        self.episode: Episode | None = None
        self._held: dict[int, list[Tool]] = {}
        self._tools = ToolSet([])
        self.inner = ToolEnv(self._make_tools, grade_episode, system=SYSTEM, limits=limits)

    def fresh(self) -> BfclMultiEnv:
        return BfclMultiEnv(self.data_dir, self.isolation, self.limits)

    def _make_tools(self, task: Task) -> ToolSet:
        gold = task.gold
        self.episode = Episode(gold, open_apis(self.isolation, gold["classes"], gold["config"], gold["long_context"]))
        timeout_s = 60.0 if self.isolation == "sandbox" else self.limits.tool_timeout_s
        docs = [d for c in gold["classes"] for d in function_docs(self.data_dir, c)]
        tools = {t.name: t for t in episode_tools(self.episode, docs, timeout_s)}
        held = {int(k): list(v) for k, v in gold["holdout"].items()}
        self._held = {k: [tools[n] for n in names if n in tools] for k, names in held.items()}
        hidden = {n for names in held.values() for n in names}
        self._tools = ToolSet([t for n, t in tools.items() if n not in hidden], state=self.episode)
        return self._tools

    def reset(self, task: Task) -> Observation:
        self._close()
        return self.inner.reset(task)

    def step(self, assistant_message: str) -> StepResult:
        result = self.inner.step(assistant_message)
        if self.episode is not None and (result.done or any(m["role"] == "user" for m in result.messages)):
            self._end_turn()
            if not result.done:
                self.episode.turn += 1
                self._tools.add(self._held.pop(self.episode.turn, []))
        return result

    def end(self, reason: str) -> None:
        if not self.inner.done:
            self.inner.end(reason)
            self._end_turn()

    def _end_turn(self) -> None:
        episode = self.episode
        if episode is None or len(episode.states) > episode.turn:
            return
        try:
            episode.states.append(episode.apis.state())
        except Exception:  # an unreadable state matches nothing
            episode.states.append({"unreadable": True})
        if self.inner.done:
            self._close()

    def _close(self) -> None:
        if self.episode is not None:
            self.episode.apis.close()

    def grade(self) -> Score:
        return self.inner.grade()


class BfclMultiFamily:
    """One domain per BFCL multi-turn category; tasks are the category's entries in file order."""

    def __init__(self, config: BfclMultiConfig) -> None:
        self.config = config
        self.data_dir = config.data_dir or package_data_dir()
        self.entries: dict[str, list[Entry]] = {c: load_category(self.data_dir, c) for c in dict.fromkeys(config.categories)}
        self._domains = [
            DomainSpec(id=f"agent/bfcl_multi/{category}", family_kind="bfcl_multi", source=f"bfcl:{self.data_dir}",
                       verifier="environment", difficulty=config.difficulty, size=len(entries),
                       description=f"BFCL {category} (multi-turn, simulated APIs)")  # fmt: skip
            for category, entries in self.entries.items()
        ]

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        category = domain.path.domain
        entry = self.entries[category][index]
        docs = entry_docs(self.data_dir, entry)
        turns = [_turn_text(entry, i, docs) for i in range(len(entry.turns))]
        gold = {"classes": list(entry.classes), "config": entry.config, "long_context": category == "multi_turn_long_context",
                "ground_truth": [list(t) for t in entry.ground_truth], "holdout": {str(k): list(v) for k, v in entry.holdout.items()}}  # fmt: skip
        return Task(id=f"{domain.id}#{entry.bfcl_id}", domain_id=domain.id, prompt=turns[0], gold=gold,
                    difficulty=domain.difficulty,
                    metadata={"bfcl_id": entry.bfcl_id, "user_turns": turns[1:], GOLD_TURNS: gold_turns(entry)})  # fmt: skip

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return EnvironmentConfig()

    def environment(self, domain: DomainSpec) -> BfclMultiEnv:
        limits = EpisodeLimits(max_turns=self.config.max_turns, max_tool_calls=self.config.max_tool_calls)
        return BfclMultiEnv(self.data_dir, self.config.isolation, limits)
