"""`Sandbox`: one isolated workspace with exec, file I/O, snapshots and forks; `run_sync` for scripts.

A sandbox owns a host workspace (size-capped tmpfs), a cgroup and, when `persistent` (the default), a
long-lived bwrap session whose supervisor runs each program; a non-persistent sandbox starts a fresh
bwrap per exec (cheapest for a single cold run). Guarantees: `exec` never raises for anything the program
does; infrastructure failures come back as `status == "sandbox_error"`; after every exec no process of
the run is left; host-side file access never follows links planted by the program; `close` kills
everything and hands the emptied tmpfs and cgroup to a small reuse cache that is removed at exit.
Snapshots are overlay layers (constant time) where mounts are allowed, incremental copies otherwise.
Not here: pooling (`pool.py`).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import shutil
import time
import warnings
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from posttrain.sandbox.cgroups import Limits
from posttrain.sandbox.host import UidSlots, backend_for, host_features
from posttrain.sandbox.images import resolve
from posttrain.sandbox.launch import Context, cgroup_memory_bytes, classify, run_oneshot
from posttrain.sandbox.session import Session, SessionError
from posttrain.sandbox.spares import Spares
from posttrain.sandbox.spec import ExecResult, SandboxSpec, sandbox_error
from posttrain.sandbox.workspace import Workspace, state_base

EXECUTOR = ThreadPoolExecutor(max_workers=64, thread_name_prefix="sandbox")
"""Blocking sandbox work runs here; its threads live for the process (bwrap dies with its parent thread)."""
PIDS_SLACK = 3  # the outer bwrap, the supervisor (or bwrap's init) and a run's own init are charged too
_SNAP_IDS = itertools.count()


class SandboxUnavailable(RuntimeError):
    """No backend on this host satisfies the spec (e.g. isolation required but bwrap unusable)."""


class SandboxSetupError(RuntimeError):
    """A setup command failed while creating a sandbox."""


@dataclass(frozen=True)
class Snapshot:
    """A frozen state of a sandbox's workspace: an overlay layer stack, or a copy where overlays are unavailable."""

    path: Path
    sandbox_id: int
    layers: tuple[str, ...] | None = None
    workspace: Workspace | None = field(default=None, compare=False, repr=False)

    def discard(self) -> None:
        """Free a copied snapshot now (layers are freed with their workspace)."""
        if self.layers is None:
            shutil.rmtree(self.path, ignore_errors=True)


SPARES = Spares(EXECUTOR)


def _build_context(spec: SandboxSpec, keep_launcher: bool = False, uid: int | None = None) -> Context:
    """A workspace + cgroup (a spare when one fits); `keep_launcher` keeps its parked launcher (run_sync);
    `uid` (a fork of a layered snapshot) shares that sandbox uid instead of taking one of its own."""
    backend, reason = backend_for(spec.backend, spec.require_isolation)
    if backend is None:
        raise SandboxUnavailable(reason)
    features = host_features()
    if backend == "local":
        warnings.warn(
            "posttrain.sandbox: LOCAL backend, programs are NOT isolated", RuntimeWarning, stacklevel=3
        )
    rootfs = resolve(spec.image, spec.rootfs) if backend == "bwrap" else None
    slots = features.uid_slots if backend == "bwrap" else None
    owners = range(0, 1) if slots is None else (slots.uids if uid is None else range(uid, uid + 1))
    limits = Limits(cgroup_memory_bytes(spec), spec.pids + PIDS_SLACK, spec.cpus)
    spare = SPARES.take(spec.disk_mb, owners, features.cgroups is not None)
    if spare is not None:
        if not keep_launcher or backend != "bwrap":
            # A supervisor must be alone in the cgroup, and a launcher's binds predate any remount
            # (snapshot, restore) a longer-lived sandbox may do before its first exec.
            spare.drop_launcher()
        try:
            if spare.cgroup is not None:
                spare.cgroup.set_limits(limits)
        except BaseException:  # whatever failed, the spare's mounts and cgroup must not leak
            spare.discard()
            raise
        return Context(spec, backend, features, spare.workspace, spare.cgroup, rootfs, spare.parked)
    workspace = _new_workspace(spec.disk_mb, slots, uid)
    try:
        cgroup = features.cgroups.create(limits) if features.cgroups is not None else None
    except BaseException:  # e.g. a limit the cgroup rejects: the tmpfs and overlay must not leak
        workspace.close()
        raise
    return Context(spec, backend, features, workspace, cgroup, rootfs)


def _new_workspace(size_mb: int, slots: UidSlots | None, uid: int | None) -> Workspace:
    """A workspace owned by a host uid of its own (or `uid`), held until the workspace is removed."""
    if slots is None:
        return Workspace.create(size_mb, 0)
    owner = uid if uid is not None and slots.retain(uid) else slots.acquire()
    try:
        workspace = Workspace.create(size_mb, owner)
    except BaseException:
        slots.release(owner)
        raise
    workspace.on_close = functools.partial(slots.release, owner)
    return workspace


def _release_context(ctx: Context, background: bool = False) -> None:
    SPARES.give(ctx, background)


def _place_files(workspace: Workspace, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        workspace.write_file(name, content.encode() if isinstance(content, str) else content)


class Sandbox:
    """Use `async with Sandbox.create(spec) as sb:` (or `sb = await Sandbox.create(spec)` + `close`)."""

    _ids = itertools.count()

    def __init__(self, ctx: Context, persistent: bool) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        self.id = next(self._ids)
        self.persistent = persistent and ctx.backend == "bwrap"
        self.session: Session | None = None
        self.snapshots: list[Snapshot] = []
        self._lock = asyncio.Lock()
        self.closed = False

    @staticmethod
    def create(spec: SandboxSpec | None = None, *, persistent: bool = True) -> _Opening:
        return _Opening(spec or SandboxSpec(), persistent)

    @property
    def backend(self) -> str:
        return self.ctx.backend

    @property
    def broken(self) -> bool:
        return self.persistent and (self.session is None or not self.session.alive)

    async def _open(self, seed: Snapshot | None = None) -> None:
        await _in_thread(self._open_sync, seed)
        for argv in self.spec.setup:
            result = await self.exec(list(argv))
            if not result.ok:
                await self.close()
                raise SandboxSetupError(
                    f"setup {list(argv)} failed: {result.status} {result.stderr[-500:]!r}"
                )

    def _open_sync(self, seed: Snapshot | None) -> None:
        workspace = self.ctx.workspace
        if seed is not None:
            workspace.restore_snapshot(seed.path, seed.layers, seed.workspace)
        else:
            _place_files(workspace, self.spec.files)
        if self.persistent:
            # bwrap must bind the plain directory under the overlay, so that later remounts on the host
            # (snapshot, restore, recycle) propagate into the running sandbox.
            if workspace.layers is not None:
                workspace.layers.unmount()
            self.session = Session(self.ctx)
            try:
                self.session.start()
            finally:
                if workspace.layers is not None:
                    workspace.layers.mount()

    async def exec(
        self,
        argv: Sequence[str],
        stdin: bytes = b"",
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run `argv` in the sandbox; never raises for the program's behaviour."""
        if not argv:
            return sandbox_error("empty argv")
        async with self._lock:
            if self.closed:
                return sandbox_error("sandbox is closed")
            start = time.monotonic()
            timeout = timeout_s or self.spec.timeout_s
            try:
                if self.persistent:
                    return await self._exec_session(list(argv), stdin, timeout, env)
                return await _in_thread(self._exec_sync, list(argv), stdin, timeout, env)
            except Exception as exc:  # noqa: BLE001 - any host-side failure is an infrastructure failure
                return sandbox_error(f"{type(exc).__name__}: {exc}", (time.monotonic() - start) * 1000)

    async def _exec_session(
        self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str] | None
    ) -> ExecResult:
        if self.session is None or not self.session.alive:
            return sandbox_error("sandbox session is not running")
        delay = self.ctx.workspace.tracker.safe_after_s - time.time()
        if delay > 0:
            await asyncio.sleep(delay)  # see snapshots.py: a write in the same timestamp tick is invisible
        cgroup = self.ctx.cgroup
        oom_before = cgroup.oom_kills() if cgroup else 0
        reply = await self.session.run_async(argv, stdin, timeout_s, env)
        oom_kills = (cgroup.oom_kills() - oom_before) if cgroup else 0
        return classify(reply, self.spec, oom_kills)

    def _exec_sync(
        self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str] | None
    ) -> ExecResult:
        self.ctx.workspace.tracker.wait_until_safe()
        cgroup = self.ctx.cgroup
        oom_before = cgroup.oom_kills() if cgroup else 0
        if self.persistent:
            if self.session is None or not self.session.alive:
                return sandbox_error("sandbox session is not running")
            reply = self.session.run(argv, stdin, timeout_s, env)
        else:
            reply = run_oneshot(self.ctx, argv, stdin, timeout_s, env=env)
        oom_kills = (cgroup.oom_kills() - oom_before) if cgroup else 0
        return classify(reply, self.spec, oom_kills)

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        await _in_thread(self.ctx.workspace.write_file, path, raw, mode)

    async def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        return await _in_thread(self.ctx.workspace.read_file, path, max_bytes)

    async def snapshot(self) -> Snapshot:
        async with self._lock:
            workspace = self.ctx.workspace
            if workspace.layers is not None:
                stack = await _in_thread(workspace.layers.snapshot)
                self._remounted()
                return Snapshot(Path(stack[0]), self.id, stack, workspace)
            store = state_base() / "snapshots"
            store.mkdir(parents=True, exist_ok=True, mode=0o700)
            snap = Snapshot(store / f"{workspace.root.name}-{next(_SNAP_IDS)}", self.id)
            await _in_thread(workspace.snapshot_to, snap.path)
            self.snapshots.append(snap)
            return snap

    async def restore(self, snap: Snapshot) -> None:
        async with self._lock:
            await _in_thread(self.ctx.workspace.restore_snapshot, snap.path, snap.layers, snap.workspace)
            await _in_thread(self.ctx.workspace.wait_for_garbage)
            self._remounted()

    def _remounted(self) -> None:
        """After the workspace's mounts may have changed: the next run must not start from a mount
        namespace copied before (a persistent run's namespaces are made ahead of its request)."""
        if self.session is not None and self.ctx.workspace.layers is not None:
            self.session.refresh()

    async def fork(self, snap: Snapshot | None = None) -> Sandbox:
        """A new sandbox with the same spec whose workspace starts as `snap` (default: a fresh snapshot)."""
        snap = snap or await self.snapshot()
        # The snapshot's layers hold files owned by its sandbox's uid: the fork must run as that uid.
        uid = snap.workspace.owner_uid if snap.layers is not None and snap.workspace is not None else None
        child = Sandbox(await _in_thread(_build_context, self.spec, False, uid), self.persistent)
        try:
            await child._open(seed=snap)
        except BaseException:
            await child.close()
            raise
        return child

    async def reset(self) -> None:
        """Recycle: no process is left (the supervisor kills them after each run); empty the workspace."""
        async with self._lock:
            if self.persistent and not self.spec.files and self.ctx.workspace.reset_if_small():
                return  # the common case costs a couple of syscalls, so skip the thread hop
            await _in_thread(self._reset_sync)
            self._remounted()

    def _reset_sync(self) -> None:
        if self.ctx.cgroup is not None and not self.persistent:
            self.ctx.cgroup.kill_all()
        self.ctx.workspace.reset()
        self.ctx.workspace.wait_for_garbage()
        _place_files(self.ctx.workspace, self.spec.files)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await _in_thread(self._close_sync)

    def _close_sync(self) -> None:
        try:
            if self.session is not None:
                self.session.close()
        finally:
            _release_context(self.ctx)
            for snap in self.snapshots:
                snap.discard()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _Opening:
    """Awaitable and async context manager returned by `Sandbox.create`."""

    def __init__(self, spec: SandboxSpec, persistent: bool) -> None:
        self.spec, self.persistent = spec, persistent
        self.sandbox: Sandbox | None = None

    async def _make(self) -> Sandbox:
        sandbox = Sandbox(await _in_thread(_build_context, self.spec), self.persistent)
        try:
            await sandbox._open()
        except SessionError as exc:
            await sandbox.close()
            raise SandboxUnavailable(str(exc)) from None
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    def __await__(self) -> Generator[Any, None, Sandbox]:
        return self._make().__await__()

    async def __aenter__(self) -> Sandbox:
        self.sandbox = await self._make()
        return self.sandbox

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.sandbox is not None:
            await self.sandbox.close()


async def _in_thread(func: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(EXECUTOR, func, *args)


def run_sync(
    argv: Sequence[str],
    spec: SandboxSpec | None = None,
    *,
    stdin: bytes = b"",
    files: dict[str, bytes] | None = None,
) -> ExecResult:
    """Run one program in a fresh one-shot sandbox, synchronously (for scripts; no event loop needed)."""
    spec = spec or SandboxSpec()
    start = time.monotonic()
    try:
        ctx = _build_context(spec, keep_launcher=True)
    except SandboxUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001
        return sandbox_error(f"{type(exc).__name__}: {exc}", (time.monotonic() - start) * 1000)
    try:
        _place_files(ctx.workspace, {**spec.files, **(files or {})})
        cgroup = ctx.cgroup
        oom_before = cgroup.oom_kills() if cgroup else 0
        reply = run_oneshot(ctx, list(argv), stdin, spec.timeout_s, wait_empty=False)
        return classify(reply, spec, (cgroup.oom_kills() - oom_before) if cgroup else 0)
    except Exception as exc:  # noqa: BLE001
        return sandbox_error(f"{type(exc).__name__}: {exc}", (time.monotonic() - start) * 1000)
    finally:
        # The recycle (and parking the next launcher) must not delay the result.
        _release_context(ctx, background=True)
