"""The spec's `task:` block (type, image, timeout, resources, verifier, retry) parsed into a `SandboxSpec`.

```yaml
task:
  type: terminal_benchmark
  image: sandbox-base:latest
  timeout: 600s
  resources: {cpu: 4, mem: 16Gi}
  verifier: pytest_runner
  retry: 2
```
Durations take `ms`, `s`, `m`, `h` suffixes (a bare number is seconds); sizes take Kubernetes-style
suffixes (`Ki`, `Mi`, `Gi`, `K`, `M`, `G`; a bare number is bytes). Guarantees: every problem raises
`ConfigError` naming the key, including numbers that are booleans, infinite, NaN, not positive or beyond
the spec's maxima (durations in (0, 1 day], sizes in [1 MiB, 1 TiB], cpu <= 1024, pids <= 1e6,
retry <= 100) and files that are not YAML at all, too large, or nested too deeply (`read_yaml`); the image
must resolve to a registered rootfs. Not here: running tasks.
This module uses `posttrain.sandbox` (spec, images); the sandbox package never imports tasks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator

from posttrain.config import StrictModel, read_yaml, validate
from posttrain.errors import ConfigError
from posttrain.sandbox.images import ImageError, resolve
from posttrain.sandbox.spec import (
    MAX_PIDS,
    MAX_SIZE_MB,
    MAX_TIMEOUT_S,
    Cores,
    NetworkMode,
    NotBool,
    SandboxSpec,
)

MAX_RETRY = 100
"""Retries of an infrastructure failure per task; more only hides a broken host."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|K|M|G|T)?\s*$")
_SIZE_UNITS = {None: 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
               "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}  # fmt: skip


def parse_duration_s(value: str | float | int) -> float:
    """`600s` -> 600.0, `10m` -> 600.0, `250ms` -> 0.25, `5` -> 5.0; in (0, `MAX_TIMEOUT_S`]."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{_show(value)} is not a duration like 30s, 10m, 1h or 250ms")
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"{_show(value)} is not a duration like 30s, 10m, 1h or 250ms")
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        seconds = float(value)  # an int too large for a float raises OverflowError, a ValueError kin
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(
            f"{_show(value)} must be a positive duration of at most {MAX_TIMEOUT_S:.0f}s (one day)"
        )
    return seconds


def parse_size_mb(value: str | float | int) -> int:
    """`16Gi` -> 16384, `512Mi` -> 512, `1G` -> 953 (10^9 bytes), a bare number is bytes; 1 MiB to 1 TiB."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{_show(value)} is not a size like 512Mi, 16Gi or 1G")
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise ValueError(f"{_show(value)} is not a size like 512Mi, 16Gi or 1G")
        size = float(match.group(1)) * _SIZE_UNITS[match.group(2)]
    else:
        size = float(value)
    if not math.isfinite(size) or not (1 << 20) <= size <= MAX_SIZE_MB << 20:
        raise ValueError(f"{_show(value)} must be a size between 1Mi and {MAX_SIZE_MB >> 20}Ti")
    return int(size) >> 20


def _checked(parse: Any, value: Any) -> Any:
    """Run `parse` for its checks; an int too large for a float is out of range too."""
    try:
        parse(value)
    except OverflowError:
        raise ValueError(f"{_show(value)} is out of range") from None
    return value


def _show(value: Any) -> str:
    """A value for an error message, cut short (a config may hold a 5000-digit number)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**40 else "a huge integer"
    return text if len(text) <= 40 else text[:37] + "..."


class TaskResources(StrictModel):
    cpu: Cores | None = None
    """CPU cores (cgroup bandwidth)."""
    mem: str | int | None = None
    """Memory, e.g. `16Gi`."""
    disk: str | int | None = None
    """Workspace size, e.g. `1Gi`."""
    pids: Annotated[int, NotBool, Field(ge=1, le=MAX_PIDS)] | None = None
    """Processes plus threads."""

    @field_validator("mem", "disk", mode="before")
    @classmethod
    def _size(cls, value: Any) -> Any:
        return value if value is None else _checked(parse_size_mb, value)


class TaskSandboxConfig(StrictModel):
    """A task's execution environment, verifier and retry budget."""

    type: str
    """Task family, e.g. `terminal_benchmark`."""
    image: str = "sandbox-base"
    """Rootfs name (`sandbox-base` = the host's system directories, read-only); `:tag` is ignored."""
    timeout: str | float = "60s"
    """Wall-clock limit per run."""
    resources: TaskResources = TaskResources()
    """CPU, memory, disk and process limits."""
    verifier: str
    """Name of the verifier that grades the task."""
    retry: Annotated[int, NotBool, Field(ge=0, le=MAX_RETRY)] = 0
    """How many times an infrastructure failure (`sandbox_error`) is retried."""
    network: NetworkMode = "none"
    """Network access inside the sandbox."""

    @field_validator("timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return _checked(parse_duration_s, value)

    @property
    def timeout_s(self) -> float:
        return parse_duration_s(self.timeout)

    def sandbox_spec(self, **overrides: Any) -> SandboxSpec:
        """The `SandboxSpec` this task runs under (keyword overrides win)."""
        try:
            resolve(self.image)
        except ImageError as exc:
            raise ConfigError(f"task.image: {exc}") from None
        fields: dict[str, Any] = {"image": self.image, "timeout_s": self.timeout_s, "network": self.network}
        res = self.resources
        if res.cpu is not None:
            fields["cpus"] = res.cpu
        if res.mem is not None:
            fields["memory_mb"] = parse_size_mb(res.mem)
        if res.disk is not None:
            fields["disk_mb"] = parse_size_mb(res.disk)
        if res.pids is not None:
            fields["pids"] = res.pids
        fields.update(overrides)
        return SandboxSpec(**fields)


def parse_task_config(source: Mapping[str, Any] | str | Path) -> TaskSandboxConfig:
    """Parse a mapping with a `task:` key (or the block itself), or a YAML file holding one."""
    name = str(source) if isinstance(source, str | Path) else "<task config>"
    data: Mapping[str, Any] = read_yaml(source) if isinstance(source, str | Path) else source
    block = data.get("task", data)
    if not isinstance(block, Mapping):
        raise ConfigError(f"{name}: task must be a mapping")
    return validate(TaskSandboxConfig, dict(block), f"{name} (task)")
