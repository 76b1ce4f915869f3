"""Build a terminal task's environment once, snapshot it, and hand out forks of the snapshot.

`prepare(package)` runs the package's build — the Dockerfile subset (`dockerfile.py`) or
`environment/setup.sh` — in a persistent sandbox, then takes `Sandbox.snapshot()` of its workspace. The
result, a `TaskSnapshot`, is cached per (package folder, content hash) for the life of the process, so a
task is built once however many episodes, validations and threads use it. `checkout()` gives an episode
a sandbox whose workspace is exactly the snapshot: a warm one (a previous episode's fork, `restore`d to
the snapshot: new overlay upper layer, new `/tmp`, no process left) or a new `Sandbox.fork`; `checkin()`
restores it and keeps it warm (at most `max_warm` per task).

Guarantees: what an episode writes never reaches another episode (each holds its own fork; a warm fork
is restored before reuse); a failed build raises `TaskBuildError` naming the file and line, is cached
(never retried in a loop) and is the task's failure, never the model's. The build context
(`environment/`) is unpacked into `/tmp`, which snapshots do not keep, so only what the build put under
`/workspace` reaches episodes. Everything runs on the sandbox background loop (`run_blocking`).
Not here: the episode itself (`shell.py`).
"""

from __future__ import annotations

import asyncio
import io
import shlex
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.errors import ConfigError
from posttrain.sandbox import ExecResult, Sandbox, SandboxUnavailable, Snapshot
from posttrain.sandbox.background import run_blocking
from posttrain.tasks.terminal.dockerfile import WORKSPACE, BuildPlan, BuildStep, parse_dockerfile
from posttrain.tasks.terminal.package import TerminalPackage, read_text

DEFAULT_WARM = 8
DEFAULT_WARM_TOTAL = 64
"""Warm forks kept across every task of the process (each holds its workspace, about 16 MB)."""
"""Forks kept per task for the next episodes (each holds a supervisor process and an overlay)."""
CONTEXT_DIR = "/tmp/.build-context"
_SETUP_TIMEOUT_S = 60.0


class TaskBuildError(RuntimeError):
    """The task's environment could not be built: the task is broken, the model is not to blame."""


def pack_dir(directory: Path) -> bytes:
    """A tar archive of `directory`'s contents (empty when it does not exist); symlinks are refused."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        if directory.is_dir():
            for path in sorted(directory.rglob("*")):
                if path.is_symlink():
                    raise ConfigError(f"{path}: symlinks are not allowed in a task package")
                archive.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    return buffer.getvalue()


def unpack_command(target: str) -> list[str]:
    """argv that replaces `target` with the tar archive given on stdin."""
    quoted = shlex.quote(target)
    return ["bash", "-c", f"rm -rf {quoted} && mkdir -p {quoted} && tar -x -C {quoted}"]


def plan_of(package: TerminalPackage) -> BuildPlan:
    """The package's build plan (a setup.sh runs as one step in /workspace; no environment: nothing)."""
    if package.dockerfile is not None:
        return parse_dockerfile(read_text(package.dockerfile), str(package.dockerfile))
    steps: tuple[BuildStep, ...] = ()
    if package.setup_script is not None:
        steps = (BuildStep("RUN", 1, f"bash {CONTEXT_DIR}/setup.sh", WORKSPACE, ()),)
    return BuildPlan(package.spec.image, steps, WORKSPACE, ())


@dataclass
class TaskSnapshot:
    """One built task: the sandbox it was built in, its snapshot, and forks waiting for episodes."""

    package: TerminalPackage
    plan: BuildPlan
    base: Sandbox
    snapshot: Snapshot
    build_s: float
    warm: list[Sandbox] = field(default_factory=list)

    @property
    def workdir(self) -> str:
        return self.plan.workdir

    @property
    def env(self) -> dict[str, str]:
        return dict(self.plan.env)

    async def checkout(self) -> Sandbox:
        """A sandbox whose workspace is the snapshot, for one episode."""
        while self.warm:
            sandbox = self.warm.pop()
            _WarmForks.count -= 1
            if not sandbox.broken:
                return sandbox
            await sandbox.close()
        return await self.base.fork(self.snapshot)

    async def checkin(self, sandbox: Sandbox, max_warm: int = DEFAULT_WARM,
                      max_total: int = DEFAULT_WARM_TOTAL) -> None:  # fmt: skip
        """Take an episode's sandbox back: restored to the snapshot and kept warm (up to `max_warm` for this
        task and `max_total` across the process), or closed."""
        if sandbox.broken or len(self.warm) >= max_warm or _WarmForks.count >= max_total:
            await sandbox.close()
            return
        try:
            await sandbox.restore(self.snapshot)
        except Exception:  # noqa: BLE001 - a sandbox that cannot be restored is simply not reused
            await sandbox.close()
            return
        if len(self.warm) >= max_warm or _WarmForks.count >= max_total:  # filled while restoring
            await sandbox.close()
            return
        self.warm.append(sandbox)
        _WarmForks.count += 1


class _WarmForks:
    """How many warm forks every task of this process holds together (all live on the one sandbox loop)."""

    count = 0


async def build(package: TerminalPackage) -> TaskSnapshot:
    """Build `package` in a new sandbox and snapshot it; `TaskBuildError` on any failure."""
    plan = plan_of(package)
    start = time.monotonic()
    deadline = start + package.config.environment.build_timeout_sec
    try:
        base = await Sandbox.create(package.spec)
    except SandboxUnavailable as exc:
        raise TaskBuildError(f"{package.root}: no sandbox: {exc}") from None
    try:
        context = pack_dir(package.root / "environment")
        await _checked(
            base, unpack_command(CONTEXT_DIR), context, deadline, {}, f"{package.root}: build context"
        )
        for step in plan.steps:
            where = f"{package.dockerfile or package.setup_script}:{step.line}"
            await _checked(base, ["bash", "-c", _step_script(step)], b"", deadline, dict(step.env), where)
        snapshot = await base.snapshot()
    except BaseException:
        await base.close()
        raise
    return TaskSnapshot(package, plan, base, snapshot, time.monotonic() - start)


def _step_script(step: BuildStep) -> str:
    cd = f"mkdir -p {shlex.quote(step.workdir)} && cd {shlex.quote(step.workdir)} || exit 125\n"
    if step.kind == "RUN":
        return cd + step.text
    src, dst = shlex.quote(f"{CONTEXT_DIR}/{step.src}"), shlex.quote(step.dst)
    return cd + (
        f"if [ -d {src} ]; then mkdir -p {dst} && cp -a {src}/. {dst}/\n"
        f"else case {dst} in */) mkdir -p {dst} && cp -a {src} {dst} ;;\n"
        f'  *) mkdir -p "$(dirname {dst})" && cp -a {src} {dst} ;; esac; fi'
    )


async def _checked(sandbox: Sandbox, argv: list[str], stdin: bytes, deadline: float, env: dict[str, str],
                   where: str) -> ExecResult:  # fmt: skip
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TaskBuildError(f"{where}: the build ran past environment.build_timeout_sec")
    result = await sandbox.exec(argv, stdin, timeout_s=remaining, env=env)
    if not result.ok:
        tail = (result.stderr or result.stdout)[-600:].decode(errors="replace").strip()
        code = f" exit {result.exit_code}" if result.exit_code is not None else ""
        raise TaskBuildError(f"{where}: build step failed ({result.status}{code}): {tail or result.error}")
    return result


_lock = threading.Lock()
_key_locks: dict[tuple[Path, str], threading.Lock] = {}
_built: dict[tuple[Path, str], TaskSnapshot | TaskBuildError] = {}


def prepare(package: TerminalPackage) -> TaskSnapshot:
    """The package's `TaskSnapshot`, built on first use (once per process); raises `TaskBuildError`."""
    key = (package.root, package.content_hash)
    with _lock:
        key_lock = _key_locks.setdefault(key, threading.Lock())
    with key_lock:
        found = _built.get(key)
        if found is None:
            try:
                found = run_blocking(
                    build(package), package.config.environment.build_timeout_sec + _SETUP_TIMEOUT_S
                )
            except (TaskBuildError, ConfigError, TimeoutError) as exc:
                found = exc if isinstance(exc, TaskBuildError) else TaskBuildError(f"{package.root}: {exc}")
            _built[key] = found
    if isinstance(found, TaskBuildError):
        raise found
    return found


def forget(package: TerminalPackage) -> None:
    """Close and drop the package's cached build (tests; a process normally keeps it to the end)."""
    found = _built.pop((package.root, package.content_hash), None)
    if isinstance(found, TaskSnapshot):
        run_blocking(_close_all(found), 60.0)


async def _close_all(snap: TaskSnapshot) -> None:
    await asyncio.gather(*(sandbox.close() for sandbox in snap.warm))
    _WarmForks.count -= len(snap.warm)
    snap.warm.clear()
    await snap.base.close()
