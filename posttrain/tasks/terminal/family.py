"""Family kind `terminal`: task packages as agent domains `terminal/<source>/<family>@<level>`.

Each source is a folder of packages (`package.py`) with a name: the built-in set
(`posttrain/tasks/data/terminal/`, source `harbor`) or any folder a user gives. The tasks of one
(source, category, difficulty) make one domain, sorted by package name; task ids are
`<domain>#<package name>`; every `environment()` call is a new `TerminalEnv`. Opt-in (not in the
default domains). Guarantees: a package that does not load is left out and reported in `problems` (the
registry prints them), never fatal for the others; a task's gold (its content hash) changes when any
file of its package does, so splits follow content; `metadata["gold_turns"]` is the oracle
(`solution/solve.sh`, then submit). Not here: building (`build.py`), the episode (`shell.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.envs.base import EpisodeLimits
from posttrain.envs.tools import ToolsPrompt
from posttrain.errors import ConfigError
from posttrain.tasks.base import GOLD_TURNS
from posttrain.tasks.terminal.build import DEFAULT_WARM, DEFAULT_WARM_TOTAL
from posttrain.tasks.terminal.package import TerminalPackage, find_packages, load_package
from posttrain.tasks.terminal.shell import ShellSettings, TerminalEnv, gold_turns
from posttrain.types import LEVEL_DIFFICULTY, DomainSpec, Level, Task
from posttrain.verify.configs import EnvironmentConfig, VerifierConfig

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "data" / "terminal"
"""The in-tree task packages, `<family>/<task>/`."""
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)


class TerminalSource(StrictModel):
    path: Path
    """A folder of task packages (at any depth), or one package."""
    name: str = Field("harbor", pattern=_SEGMENT.pattern)
    """The middle segment of its domain ids."""


class TerminalConfig(StrictModel):
    kind: Literal["terminal"] = "terminal"
    """Terminal tasks from task packages, played by a shell agent (opt-in)."""
    sources: list[TerminalSource] = Field(default_factory=lambda: [TerminalSource(path=BUILTIN_DIR)])
    """Where the packages are; default: the built-in set."""
    families: list[str] | None = None
    """Only these categories (None: all)."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Only these difficulties."""
    max_turns: int = Field(16, ge=1)
    """Assistant messages per episode."""
    max_commands: int = Field(32, ge=1)
    """bash calls per episode."""
    max_output_chars: int = Field(4000, ge=100)
    """Characters of one command's output shown to the model (head and tail kept)."""
    command_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Wall-clock limit of one command (the task's `[agent] timeout_sec` bounds the episode)."""
    tools_prompt: ToolsPrompt = "hermes"
    """How the system prompt lists the bash and submit tools."""
    warm_forks: int = Field(DEFAULT_WARM, ge=0, le=256)
    """Restored forks kept per task for the next episodes (at least the group size avoids cold forks)."""
    warm_forks_total: int = Field(DEFAULT_WARM_TOTAL, ge=0, le=4096)
    """Restored forks kept across every task of the process (each holds its workspace, about 16 MB)."""


class TerminalFamily:
    """Loads the packages once; builds one `TerminalEnv` per episode."""

    def __init__(self, config: TerminalConfig) -> None:
        self.config = config
        self.problems: list[str] = []
        self._domains: dict[str, list[TerminalPackage]] = {}
        self._by_task: dict[str, TerminalPackage] = {}
        for source in config.sources:
            self._load(source)
        self.limits = EpisodeLimits(max_turns=config.max_turns, max_tool_calls=config.max_commands)
        self.settings = ShellSettings(
            config.max_output_chars, config.command_timeout_s, config.tools_prompt, config.warm_forks,
            config.warm_forks_total,
        )

    def _load(self, source: TerminalSource) -> None:
        if not source.path.exists():
            if source.path != BUILTIN_DIR:
                self.problems.append(f"terminal: {source.path} does not exist")
            return
        for root in find_packages(source.path):
            try:
                package = load_package(root)
            except ConfigError as exc:
                self.problems.append(f"terminal: skipped {exc}")
                continue
            if not _SEGMENT.match(package.family) or not _SEGMENT.match(package.name):
                self.problems.append(
                    f"terminal: skipped {root}: family and task names must match {_SEGMENT.pattern}"
                )
                continue
            if self.config.families is not None and package.family not in self.config.families:
                continue
            if package.level in self.config.levels:
                domain_id = f"terminal/{source.name}/{package.family}@{package.level}"
                self._domains.setdefault(domain_id, []).append(package)
        for packages in self._domains.values():
            packages.sort(key=lambda p: p.name)
        # Domains of a family in level order (easy, medium, hard), as the other families list them.
        ordered = sorted(
            self._domains.items(),
            key=lambda item: (item[0].split("@")[0], _ALL_LEVELS.index(item[1][0].level)),
        )
        self._domains = dict(ordered)

    def domains(self) -> Sequence[DomainSpec]:
        return [DomainSpec(id=domain_id, family_kind="terminal", source="task_packages", verifier="environment",
                           difficulty=LEVEL_DIFFICULTY[packages[0].level], size=len(packages),
                           description=f"terminal tasks: {packages[0].family}, {packages[0].level}")
                for domain_id, packages in self._domains.items()]  # fmt: skip

    def package(self, domain: DomainSpec, index: int) -> TerminalPackage:
        return self._domains[domain.id][index]

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        package = self.package(domain, index)
        task_id = f"{domain.id}#{package.name}"
        self._by_task[task_id] = package
        return Task(id=task_id, domain_id=domain.id, prompt=package.instruction,
                    gold={"package": package.name, "content_hash": package.content_hash},
                    difficulty=domain.difficulty,
                    metadata={GOLD_TURNS: gold_turns(package), "package_dir": str(package.root)})  # fmt: skip

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return EnvironmentConfig()

    def environment(self, domain: DomainSpec) -> TerminalEnv:
        return TerminalEnv(self._package_of, self.limits, self.settings)

    def _package_of(self, task: Task) -> TerminalPackage:
        package = self._by_task.get(task.id)
        if package is None:
            domain_id, _, name = task.id.rpartition("#")
            matches = [p for p in self._domains.get(domain_id, []) if p.name == name]
            if not matches:
                raise KeyError(f"no terminal package for task {task.id!r}")
            package = self._by_task[task.id] = matches[0]
        return package
