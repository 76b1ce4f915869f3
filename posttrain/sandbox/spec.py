"""What a sandbox is asked to be (`SandboxSpec`) and what one run in it produced (`ExecResult`).

Pure data. Guarantees: a spec is frozen and validated (unknown keys rejected; every number finite, a
real number rather than a boolean, positive and at most a documented maximum such as `MAX_TIMEOUT_S`),
and a bad one raises `ConfigError` naming the field, never a raw pydantic error; an `ExecResult` always
carries one of seven statuses, and `sandbox_error` is the only one that means the infrastructure failed
rather than the program. Not here: how limits are enforced (backends).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from posttrain.config import StrictModel, format_validation_error
from posttrain.errors import ConfigError

Status = Literal[
    "ok", "runtime_error", "timeout_wall", "timeout_cpu", "memory_limit", "output_limit", "sandbox_error"
]
NetworkMode = Literal["none", "loopback"]
BackendName = Literal["auto", "bwrap", "local"]

DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = ("LANG", "LC_ALL", "TZ")

MAX_TIMEOUT_S = 86400.0
"""One day: the longest wall-clock or CPU-time limit of one run."""
MAX_CPUS = 1024.0
"""Cores of the CPU bandwidth cap; a larger quota is meaningless (and inf breaks the cgroup write)."""
MAX_SIZE_MB = 1 << 20
"""1 TiB: the largest memory, disk or output budget."""
MAX_PIDS = 1_000_000
"""Processes plus threads (the kernel's own ceiling is 4M)."""
MAX_NOFILE = 1 << 20
"""The kernel's default `fs.nr_open`."""
MAX_OUTPUT_BYTES = 1 << 30
"""Bytes kept per stream are held in memory by the host, so at most 1 GiB."""


def _not_bool(value: Any) -> Any:
    """YAML `yes`/`true` is a boolean, and pydantic would quietly read it as 1."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    return value


NotBool = BeforeValidator(_not_bool)
Seconds = Annotated[float, NotBool, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)]
"""A finite duration in (0, one day]."""
Cores = Annotated[float, NotBool, Field(gt=0, le=MAX_CPUS, allow_inf_nan=False)]
SizeMb = Annotated[int, NotBool, Field(ge=1, le=MAX_SIZE_MB)]
"""An integral float such as 1e30 is read as the number it is, then bounded."""


class SandboxSpec(StrictModel):
    """Resources, isolation and contents of one sandbox."""

    backend: BackendName = "auto"
    """Which launcher: `bwrap` (isolating), `local` (NOT isolating), or `auto` (bwrap when usable)."""
    require_isolation: bool = True
    """Refuse to run on a backend that does not isolate (the `local` one)."""
    image: str = "sandbox-base"
    """Name of a registered rootfs; `sandbox-base` is the host's system directories, read-only."""
    rootfs: str | None = None
    """Explicit rootfs directory (overrides `image`); bound read-only as `/`."""
    timeout_s: Seconds = 10.0
    """Wall-clock limit for one exec (at most `MAX_TIMEOUT_S`)."""
    cpu_time_s: Seconds | None = None
    """CPU-time limit per process of one exec (RLIMIT_CPU); None means `timeout_s`."""
    cpus: Cores | None = None
    """CPU bandwidth cap in cores (cgroup quota, at most `MAX_CPUS`); None means uncapped."""
    memory_mb: SizeMb = 512
    """Memory for the program (cgroup); workspace files written by it are charged too."""
    pids: Annotated[int, NotBool, Field(ge=1, le=MAX_PIDS)] = 64
    """Processes plus threads the program may have at once (cgroup pids)."""
    disk_mb: SizeMb = 64
    """Size cap of the writable workspace plus /tmp, and the largest file (RLIMIT_FSIZE)."""
    nofile: Annotated[int, NotBool, Field(ge=16, le=MAX_NOFILE)] = 256
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    network: NetworkMode = "none"
    """`none`: no sockets of the internet families at all; `loopback`: a private loopback only."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables set in the sandbox."""
    env_allowlist: tuple[str, ...] = DEFAULT_ENV_ALLOWLIST
    """Host environment variables copied in when present; nothing else from the host leaks in."""
    files: dict[str, str | bytes] = Field(default_factory=dict)
    """Files placed in the workspace at creation and after every recycle (relative path -> content)."""
    setup: tuple[tuple[str, ...], ...] = ()
    """Commands run once in the sandbox after the files are placed; a failure aborts creation."""
    max_output_bytes: Annotated[int, NotBool, Field(ge=64, le=MAX_OUTPUT_BYTES)] = 65536
    """Bytes of each stream kept: the first and last halves; the original count is always reported."""
    output_limit_mb: SizeMb = 64
    """Total output after which the program is killed and the run reported as `output_limit`."""

    def __init__(self, **data: Any) -> None:
        """Validate like any model, but a bad field is a `ConfigError` naming it (specs come from configs)."""
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc, "sandbox spec")) from None

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, files: dict[str, str | bytes]) -> dict[str, str | bytes]:
        for name in files:
            if name.startswith("/") or ".." in name.split("/") or not name.strip("/"):
                raise ValueError(f"file path {name!r} must be relative and stay inside the workspace")
        return files

    @property
    def cpu_limit_s(self) -> float:
        """The effective CPU-time limit."""
        return self.cpu_time_s if self.cpu_time_s is not None else self.timeout_s


class ExecResult(BaseModel):
    """Outcome of one program run in a sandbox."""

    model_config = ConfigDict(frozen=True)

    status: Status
    """How the run ended; only `sandbox_error` is an infrastructure failure."""
    exit_code: int | None = None
    """Exit status when the program exited normally."""
    signal: int | None = None
    """Signal number when the program was killed by a signal."""
    stdout: bytes = b""
    """Standard output, head and tail kept when longer than the cap."""
    stderr: bytes = b""
    """Standard error, head and tail kept when longer than the cap."""
    stdout_bytes: int = 0
    """Original length of standard output."""
    stderr_bytes: int = 0
    """Original length of standard error."""
    wall_ms: float = 0.0
    """Wall time of the run."""
    cpu_ms: float = 0.0
    """User plus system CPU time of the program and its reaped descendants."""
    peak_memory_mb: float = 0.0
    """Largest resident set of any process of the run."""
    error: str = ""
    """What went wrong, for `sandbox_error` (and a short note for limits)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def sandbox_error(message: str, wall_ms: float = 0.0) -> ExecResult:
    """An infrastructure failure; never the program's fault."""
    return ExecResult(status="sandbox_error", error=message, wall_ms=wall_ms)
