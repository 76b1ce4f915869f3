"""The domain registry: family configs in, domains (spec + generator + verifier config) out.

The discriminated union `FamilyConfig` *is* the list of family kinds; `FAMILIES` is the one
explicit mapping from config type to implementation; out-of-tree families enter through
`kind: plugin`. A domains file is YAML validated by `DomainsConfig`; with no `domains` key it holds
every built-in family at every level. Guarantees: domain ids are unique (a clash is a ConfigError),
unknown ids fail with the closest known ids suggested.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from posttrain.config import StrictModel, load_config
from posttrain.envs.base import Environment, run_scripted
from posttrain.errors import ConfigError
from posttrain.plugins import Builders, PluginConfig, plugin_builder
from posttrain.tasks.base import DomainFamily, EnvironmentFamily
from posttrain.tasks.families.arithmetic import ArithmeticConfig, ArithmeticFamily
from posttrain.tasks.families.bfcl import BfclConfig, BfclFamily
from posttrain.tasks.families.bfcl_multi import BfclMultiConfig, BfclMultiFamily
from posttrain.tasks.families.cad import CadConfig, CadFamily
from posttrain.tasks.families.code import CodeConfig, CodeFamily
from posttrain.tasks.families.gamedev import GameDevConfig, GameDevFamily
from posttrain.tasks.families.jsonl import JsonlConfig, JsonlFamily
from posttrain.tasks.families.knowledge import KnowledgeConfig, KnowledgeFamily
from posttrain.tasks.families.lists import ListsConfig, ListsFamily
from posttrain.tasks.families.reasoning_gym import ReasoningGymFamily, ReasoningGymFamilyConfig
from posttrain.tasks.families.strings import StringsConfig, StringsFamily
from posttrain.tasks.families.tool_use import ToolUseConfig, ToolUseFamily
from posttrain.tasks.terminal.family import TerminalConfig, TerminalFamily
from posttrain.types import DomainSpec, Score, Task
from posttrain.verify import ExecutorConfig, Grader
from posttrain.verify.configs import VerifierConfig


class PluginFamilyConfig(PluginConfig):
    """An out-of-tree family: `plugin` names a callable taking `params`, returning a DomainFamily."""


FamilyConfig = Annotated[
    ArithmeticConfig
    | StringsConfig
    | ListsConfig
    | JsonlConfig
    | ReasoningGymFamilyConfig
    | BfclConfig
    | ToolUseConfig
    | BfclMultiConfig
    | CodeConfig
    | GameDevConfig
    | CadConfig
    | TerminalConfig
    | KnowledgeConfig
    | PluginFamilyConfig,
    Field(discriminator="kind"),
]


FAMILIES: Builders[DomainFamily] = Builders("domain family", {
    ArithmeticConfig: ArithmeticFamily, StringsConfig: StringsFamily, ListsConfig: ListsFamily,
    JsonlConfig: JsonlFamily, ReasoningGymFamilyConfig: ReasoningGymFamily, BfclConfig: BfclFamily,
    ToolUseConfig: ToolUseFamily,
    BfclMultiConfig: BfclMultiFamily,
    CodeConfig: CodeFamily,
    GameDevConfig: GameDevFamily,
    CadConfig: CadFamily,
    TerminalConfig: TerminalFamily,
    KnowledgeConfig: KnowledgeFamily,
    PluginFamilyConfig: plugin_builder(DomainFamily, "DomainFamily"),
})


class DomainEntry(StrictModel):
    """One family in a domains file, with optional per-domain overrides."""

    family: FamilyConfig
    """The family and its parameters."""
    include: list[str] = Field(default_factory=lambda: ["*"])
    """Glob patterns over domain ids: only matching domains of the family are kept."""
    target_pass_rate: float | None = Field(None, ge=0.0, le=1.0)
    """Override of every kept domain's target pass rate."""
    min_weight: float | None = Field(None, ge=0.0, le=1.0)
    """Override of the sampling-weight floor."""
    max_weight: float | None = Field(None, ge=0.0, le=1.0)
    """Override of the sampling-weight ceiling."""
    verifier: VerifierConfig | None = None
    """Override of the family's verifier."""


def _all_builtin() -> list[DomainEntry]:
    return [
        DomainEntry(family=ArithmeticConfig()),
        DomainEntry(family=StringsConfig()),
        DomainEntry(family=ListsConfig()),
        DomainEntry(family=ReasoningGymFamilyConfig()),
    ]


def opt_in_entries() -> list[DomainEntry]:
    """Every opt-in family at its default parameters (not in the default domains: each needs a sandbox,
    data packages or host tools): what `posttrain domains list` shows beside the default set."""
    return [
        DomainEntry(family=ToolUseConfig()), DomainEntry(family=BfclConfig()), DomainEntry(family=BfclMultiConfig()),
        DomainEntry(family=CodeConfig()), DomainEntry(family=TerminalConfig()), DomainEntry(family=KnowledgeConfig()),
        DomainEntry(family=CadConfig()), DomainEntry(family=GameDevConfig()),
    ]  # fmt: skip


class DomainsConfig(StrictModel):
    """A domains file: which domains exist for a run and how tasks are split."""

    seed: int = 0
    """Generation seed: the same seed yields the same tasks everywhere."""
    eval_fraction: float = Field(0.1, gt=0.0, lt=1.0)
    """Share of task contents (by hash) reserved for evaluation."""
    domains: list[DomainEntry] = Field(default_factory=_all_builtin)
    """The families; default: every built-in family at every level."""
    untrained: list[str] = Field(default_factory=list)
    """Glob patterns over domain ids: domains evaluated before and after training (and in the tiny base
    model's SFT) but never sampled for RL, to show what training does to capabilities it does not train."""

    def untrained_ids(self, domain_ids: Sequence[str]) -> list[str]:
        """The ids among `domain_ids` that match an `untrained` pattern; every pattern must match one."""
        for pattern in self.untrained:
            if not any(fnmatch.fnmatchcase(d, pattern) for d in domain_ids):
                raise ConfigError(f"domains.untrained: {pattern!r} matches no domain")
        return [d for d in domain_ids if any(fnmatch.fnmatchcase(d, p) for p in self.untrained)]


@dataclass(frozen=True)
class Domain:
    """A registry row: the spec, its generator, and the verifier config that grades it."""

    spec: DomainSpec
    family: DomainFamily
    verifier: VerifierConfig


class UnknownDomainError(ConfigError):
    """A domain id that is not in the registry."""


class DomainRegistry:
    """All domains of a run, by id, in declaration order."""

    def __init__(self, entries: Iterable[DomainEntry]) -> None:
        self._domains: dict[str, Domain] = {}
        self.problems: list[str] = []
        for entry in entries:
            self._add_entry(entry)

    @classmethod
    def from_config(cls, config: DomainsConfig) -> DomainRegistry:
        return cls(config.domains)

    def _add_entry(self, entry: DomainEntry) -> None:
        family = FAMILIES.build(entry.family)
        self.problems.extend(getattr(family, "problems", []))
        updates = {
            key: getattr(entry, key)
            for key in ("target_pass_rate", "min_weight", "max_weight")
            if getattr(entry, key) is not None
        }
        if entry.verifier is not None:
            updates["verifier"] = entry.verifier.kind
        for spec in family.domains():
            if not any(fnmatch.fnmatchcase(spec.id, pattern) for pattern in entry.include):
                continue
            if spec.id in self._domains:
                raise ConfigError(f"domain {spec.id!r} is declared twice")
            verifier = entry.verifier or family.verifier(spec)
            self._domains[spec.id] = Domain(spec.model_copy(update=updates), family, verifier)

    def __len__(self) -> int:
        return len(self._domains)

    def __contains__(self, domain_id: object) -> bool:
        return domain_id in self._domains

    def ids(self) -> list[str]:
        return list(self._domains)

    def specs(self) -> list[DomainSpec]:
        return [d.spec for d in self._domains.values()]

    def get(self, domain_id: str) -> Domain:
        try:
            return self._domains[domain_id]
        except KeyError:
            close = difflib.get_close_matches(domain_id, self._domains, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownDomainError(f"unknown domain {domain_id!r}{hint}") from None

    def verifier_config(self, domain_id: str) -> VerifierConfig:
        """The config of the verifier that grades `domain_id` (a `Grader`'s lookup)."""
        return self.get(domain_id).verifier

    def is_episodic(self, domain_id: str) -> bool:
        """Whether `domain_id` is an agent domain (played as episodes of its family's environment)."""
        return isinstance(self.get(domain_id).family, EnvironmentFamily)

    def environment(self, domain_id: str) -> Environment | None:
        """A fresh environment for one episode of `domain_id`; None for single-turn domains."""
        domain = self.get(domain_id)
        if isinstance(domain.family, EnvironmentFamily):
            return domain.family.environment(domain.spec)
        return None

    def score_episode(self, task: Task, turns: Sequence[str]) -> Score:
        """The grade of the episode made by feeding `turns` to `task`'s environment in order."""
        env = self.environment(task.domain_id)
        if env is None:
            raise ValueError(f"{task.domain_id} is not an agent domain")
        return run_scripted(env, task, turns)[1]

    def grader(self, executor: ExecutorConfig | None = None) -> Grader:
        """A `Grader` of these domains (agent domains through `score_episode`)."""
        return Grader(self.verifier_config, executor, episodes=self.score_episode)

    def select(self, patterns: Sequence[str]) -> list[str]:
        """Ids matching any glob pattern (an exact id matches itself); unknown exact ids raise."""
        chosen: list[str] = []
        for pattern in patterns:
            if not any(ch in pattern for ch in "*?["):
                self.get(pattern)
            chosen.extend(i for i in self._domains if fnmatch.fnmatchcase(i, pattern) and i not in chosen)
        return chosen


def load_domains(path: str | Path | None, overrides: Sequence[str] = ()) -> DomainsConfig:
    """Read a domains YAML (None: the built-in default), resolving JSONL paths against its folder."""
    config = load_config(DomainsConfig, path, overrides)
    return config if path is None else resolve_paths(config, Path(path).resolve().parent)


def resolve_paths(config: DomainsConfig, base: Path) -> DomainsConfig:
    """Make relative dataset paths absolute against `base` (the folder of the YAML declaring them)."""
    entries = [_resolve_entry(entry, base) for entry in config.domains]
    return config.model_copy(update={"domains": entries})


def _resolve_entry(entry: DomainEntry, base: Path) -> DomainEntry:
    family = entry.family
    if isinstance(family, JsonlConfig) and not family.path.is_absolute():
        family = family.model_copy(update={"path": base / family.path})
        return entry.model_copy(update={"family": family})
    if isinstance(family, KnowledgeConfig) and family.python_docs_dir is not None and not family.python_docs_dir.is_absolute():
        family = family.model_copy(update={"python_docs_dir": base / family.python_docs_dir})
        return entry.model_copy(update={"family": family})
    if isinstance(family, TerminalConfig):
        sources = [s.model_copy(update={"path": base / s.path}) for s in family.sources]
        return entry.model_copy(update={"family": family.model_copy(update={"sources": sources})})
    return entry
