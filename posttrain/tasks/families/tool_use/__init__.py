"""Procedural tool-use domains: `agent/tools/<family>@<level>` over per-episode simulated APIs.

Six families (one module each): `calculator` (unit conversion and sums through tools), `kv` (a key-value
store), `calendar` (booking over a calendar API), `inventory` (items and orders), `files` (an in-memory
file system) and `chain` (multi-hop lookups: each call needs the previous result). The level sets the
number of required calls (easy 1-2, medium 2-3, hard 4-5) and of distractor records. Family kind
`tools` (`ToolUseConfig`) is opt-in: it is not among the default domains.

Guarantees: tasks are deterministic in (seed, index); each `environment()` call is a new `ToolEnv`
whose state is built per episode; every task's `metadata["gold_turns"]` are the messages of the
reference policy on that task (transient failures included) and score exactly 1. Grading and failure
injection are described in `common.py`. Not here: the generic episode loop (`posttrain.envs.base`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.envs.base import EpisodeLimits, ToolEnv
from posttrain.envs.tools import ToolsPrompt
from posttrain.tasks.base import GOLD_TURNS, op_level_domains, task_id, task_rng
from posttrain.tasks.families.tool_use import calc, chain, files, inventory, kv, schedule
from posttrain.tasks.families.tool_use.common import FamilySpec, gold_record, gold_turns, make_env
from posttrain.types import DomainSpec, Level, Task
from posttrain.verify.configs import EnvironmentConfig, VerifierConfig

ToolFamilyName = Literal["calculator", "kv", "calendar", "inventory", "files", "chain"]
SPECS: dict[str, FamilySpec] = {spec.name: spec for spec in (calc.SPEC, kv.SPEC, schedule.SPEC, inventory.SPEC,
                                                              files.SPEC, chain.SPEC)}  # fmt: skip
_ALL_FAMILIES: tuple[ToolFamilyName, ...] = get_args(ToolFamilyName)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)


class ToolUseConfig(StrictModel):
    kind: Literal["tools"] = "tools"
    """Procedural multi-turn tool use over simulated APIs (opt-in)."""
    families: list[ToolFamilyName] = Field(default_factory=lambda: list(_ALL_FAMILIES))
    """Which tool families become domains."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which difficulty levels become domains."""
    failure_rate: float = Field(0.2, ge=0.0, le=0.5)
    """Share of tool calls that fail transiently (never two in a row, so a retry always succeeds)."""
    max_turns: int = Field(16, ge=1)
    """Assistant messages per episode."""
    max_tool_calls: int = Field(32, ge=1)
    """Tool calls per episode."""
    tools_prompt: ToolsPrompt = "hermes"
    """How the system prompt describes the tools: `hermes` JSON schemas, or `compact` signature lines (for
    the embedded tiny model's short context)."""


class ToolUseFamily:
    """Generates tool-use tasks and builds one `ToolEnv` per episode."""

    def __init__(self, config: ToolUseConfig) -> None:
        self.config = config
        self.limits = EpisodeLimits(max_turns=config.max_turns, max_tool_calls=config.max_tool_calls)

    def domains(self) -> Sequence[DomainSpec]:
        families, levels = self.config.families, self.config.levels
        return op_level_domains("agent/tools", "tools", "tool use:", families, levels, lambda _: "environment")

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        spec = SPECS[domain.path.domain]
        generated = spec.generate(task_rng(seed, domain.id, index), domain.level or "medium")
        task = Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=generated.prompt,
                    gold=gold_record(spec, generated), difficulty=domain.difficulty)  # fmt: skip
        turns = gold_turns(self.environment(domain), task)
        return task.model_copy(update={"metadata": {GOLD_TURNS: turns}})

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return EnvironmentConfig()

    def environment(self, domain: DomainSpec) -> ToolEnv:
        return make_env(SPECS[domain.path.domain], self.config.failure_rate, self.limits, self.config.tools_prompt)
