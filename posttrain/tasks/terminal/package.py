"""A terminal task package on disk: `task.toml` (Harbor's schema) or the seed's `task.yaml`, loaded into
one `TerminalPackage`.

Layout (Harbor / Terminal-Bench 2): `task.toml` (or `task.yaml`), `instruction.md`,
`environment/Dockerfile` (the subset of `dockerfile.py`) or `environment/setup.sh`, `solution/solve.sh`
(the oracle, optional), `tests/test.sh`. Guarantees: every problem is a `ConfigError` naming the file and
the key (unknown keys are refused everywhere but `[metadata]`, which is free-form past its typed keys);
`allow_internet = true` and GPUs are refused with a message saying why (sandboxes have no network); the
resources become a `SandboxSpec` with `network="none"`; `content_hash` covers every file of the package,
so a changed package is built again. Not here: building the environment (`build.py`), running episodes
(`shell.py`).
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from posttrain.config import StrictModel, read_yaml, validate
from posttrain.errors import ConfigError
from posttrain.sandbox.images import ImageError, resolve
from posttrain.sandbox.spec import Cores, SandboxSpec, Seconds, SizeMb
from posttrain.tasks.sandbox_config import TaskSandboxConfig, parse_duration_s, parse_size_mb
from posttrain.types import Level

MAX_FILE_BYTES = 4 << 20
"""Largest file of a package read into memory (instruction, scripts, build context files)."""


class HarborMetadata(StrictModel):
    """`[metadata]`: the typed keys; anything else (author, source, ...) is kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    difficulty: Level = "medium"
    """The task's level: its domain is `terminal/<source>/<category>@<difficulty>`."""
    category: str | None = None
    """The task family; default: the name of the folder holding the package."""
    tags: list[str] = Field(default_factory=list)
    """Free labels."""


class HarborVerifier(StrictModel):
    timeout_sec: Seconds = 30.0
    """Wall-clock limit of `tests/test.sh`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the test run."""


class HarborAgent(StrictModel):
    timeout_sec: Seconds = 120.0
    """Wall-clock budget of the whole episode's commands."""


class HarborEnvironment(StrictModel):
    build_timeout_sec: Seconds = 600.0
    """Wall-clock limit of the whole build."""
    docker_image: str | None = None
    """A prebuilt image: accepted only when it names a registered sandbox image."""
    cpus: Cores = 1.0
    """CPU cores (cgroup bandwidth)."""
    memory_mb: SizeMb = 512
    """Memory of each run."""
    storage_mb: SizeMb = 64
    """Size of `/workspace` plus `/tmp` (snapshot layers included)."""
    memory: str | None = None
    """Older spelling of the memory, e.g. `4G` (suffixes as in `sandbox_config.parse_size_mb`); wins when given."""
    storage: str | None = None
    """Older spelling of the storage size; wins when given."""
    gpus: int = Field(0, ge=0, le=0)
    """GPUs: none (sandboxes have no devices)."""
    allow_internet: bool = False
    """Must be false: sandboxes run without a network."""

    @field_validator("memory", "storage")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None:
            parse_size_mb(value)
        return value


class HarborSolution(StrictModel):
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the oracle's run."""


class TaskToml(StrictModel):
    """Harbor's `task.toml`."""

    version: str = "1.0"
    """Schema version."""
    metadata: HarborMetadata = HarborMetadata()
    """Difficulty, category, tags and free keys."""
    verifier: HarborVerifier = HarborVerifier()
    """How the tests run."""
    agent: HarborAgent = HarborAgent()
    """The episode's budget."""
    environment: HarborEnvironment = HarborEnvironment()
    """Resources and the image."""
    solution: HarborSolution = HarborSolution()
    """How the oracle runs."""
    source: str | None = None
    """The dataset the task comes from."""


@dataclass(frozen=True)
class TerminalPackage:
    """One loaded package; files are read lazily, paths are absolute."""

    root: Path
    config: TaskToml
    spec: SandboxSpec
    """What each sandbox of the task is (its `timeout_s` is the agent's budget)."""

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def family(self) -> str:
        return self.config.metadata.category or self.root.parent.name

    @property
    def level(self) -> Level:
        return self.config.metadata.difficulty

    @cached_property
    def instruction(self) -> str:
        return read_text(self.root / "instruction.md").strip()

    @property
    def dockerfile(self) -> Path | None:
        path = self.root / "environment" / "Dockerfile"
        return path if path.is_file() else None

    @property
    def setup_script(self) -> Path | None:
        path = self.root / "environment" / "setup.sh"
        return path if path.is_file() else None

    @property
    def solution(self) -> str | None:
        path = self.root / "solution" / "solve.sh"
        return read_text(path) if path.is_file() else None

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @cached_property
    def content_hash(self) -> str:
        """sha256 over every file's relative path and bytes."""
        digest = hashlib.sha256()
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(self.root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
        return digest.hexdigest()


def read_text(path: Path) -> str:
    """A package file as text; a missing, huge or non-UTF-8 file is a `ConfigError` naming it."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        return raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def is_package(path: Path) -> bool:
    return (path / "task.toml").is_file() or (path / "task.yaml").is_file()


def find_packages(root: Path) -> list[Path]:
    """Package folders under `root` (itself, or any depth below), sorted."""
    if is_package(root):
        return [root]
    return sorted(p.parent for p in root.rglob("task.*") if p.name in ("task.toml", "task.yaml"))


def load_package(root: str | Path) -> TerminalPackage:
    """Load and check the package in folder `root`."""
    root = Path(root).resolve()
    if (root / "task.toml").is_file():
        config = _load_toml(root / "task.toml")
        spec = _toml_spec(config, root / "task.toml")
    elif (root / "task.yaml").is_file():
        config, spec = _load_yaml(root / "task.yaml")
    else:
        raise ConfigError(f"{root}: no task.toml or task.yaml")
    package = TerminalPackage(root, config, spec)
    _check_files(package)
    return package


def _load_toml(path: Path) -> TaskToml:
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    config = validate(TaskToml, data, str(path))
    if config.environment.allow_internet:
        raise ConfigError(f"{path}: environment.allow_internet = true is not supported: task sandboxes have no "
                          "network (set it to false and make the task work offline)")  # fmt: skip
    return config


def _toml_spec(config: TaskToml, path: Path) -> SandboxSpec:
    env = config.environment
    image = env.docker_image or "sandbox-base"
    try:
        resolve(image)
    except ImageError as exc:
        raise ConfigError(
            f"{path}: environment.docker_image: {exc} (only registered sandbox images run here)"
        ) from None
    memory_mb = parse_size_mb(env.memory) if env.memory is not None else env.memory_mb
    disk_mb = parse_size_mb(env.storage) if env.storage is not None else env.storage_mb
    return SandboxSpec(image=image, timeout_s=config.agent.timeout_sec, cpus=env.cpus, memory_mb=memory_mb,
                       disk_mb=disk_mb, network="none")  # fmt: skip


def _load_yaml(path: Path) -> tuple[TaskToml, SandboxSpec]:
    """The seed's task YAML (`task:` block, `posttrain.tasks.sandbox_config`) plus an optional `metadata:`
    mapping, onto the same model."""
    data = read_yaml(path)
    block = data.get("task")
    if not isinstance(block, Mapping):
        raise ConfigError(f"{path}: task: a mapping is required")
    task = validate(TaskSandboxConfig, dict(block), f"{path} (task)")
    if task.network != "none":
        raise ConfigError(f"{path}: task.network: terminal tasks run with network none")
    spec = task.sandbox_spec()
    res = task.resources
    fields: dict[str, Any] = {
        "metadata": data.get("metadata", {}),
        "agent": {"timeout_sec": parse_duration_s(task.timeout)},
        "environment": {"docker_image": task.image, "cpus": res.cpu or 1.0,
                        "memory_mb": parse_size_mb(res.mem) if res.mem is not None else spec.memory_mb,
                        "storage_mb": parse_size_mb(res.disk) if res.disk is not None else spec.disk_mb},
    }  # fmt: skip
    extra = set(data) - {"task", "metadata"}
    if extra:
        raise ConfigError(f"{path}: unknown key {sorted(extra)[0]!r} (expected task, metadata)")
    return validate(TaskToml, fields, str(path)), spec


def _check_files(package: TerminalPackage) -> None:
    if not (package.root / "instruction.md").is_file():
        raise ConfigError(f"{package.root}: instruction.md is missing")
    if not (package.tests_dir / "test.sh").is_file():
        raise ConfigError(f"{package.root}: tests/test.sh is missing")
    if package.dockerfile is not None and package.setup_script is not None:
        raise ConfigError(f"{package.root}/environment: give a Dockerfile or setup.sh, not both")
