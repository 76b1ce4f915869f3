"""Memory, pids and CPU limits for one sandbox behind one interface, with cgroup v1 and v2 backends.

The backend is chosen at run time from /proc/self/cgroup and /proc/self/mountinfo: v2 when the unified
hierarchy offers the memory and pids controllers, else v1 when those controllers are mounted as v1
hierarchies (a hybrid host), else none (rlimits only; `posttrain sandbox check` says so). v1 groups are
created under the path this process has in each hierarchy; v2 groups under the unified root.
Guarantees: `kill_all` leaves the group empty (or raises); `close` removes the group; the `oom_kills`
counter is monotone so callers diff it around a run; `cleanup_all` (at exit) leaves no
`posttrain-sandbox-<pid>` directory of this process in any hierarchy.
Not here: attaching processes (the launcher writes its own pid to `attach_paths` before exec).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

_COUNTER = itertools.count()
_MANAGERS: list[CgroupManager] = []
"""Every manager `detect` returned in this process, for `cleanup_all` at exit."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    pids: int
    cpu_quota: float | None  # cores


class CgroupGroup(Protocol):
    """One sandbox's control group (in one or several hierarchies)."""

    def attach_paths(self) -> list[str]: ...
    def set_limits(self, limits: Limits) -> None: ...
    def pids(self) -> list[int]: ...
    def oom_kills(self) -> int: ...
    def kill_all(self, timeout_s: float = 5.0) -> None: ...
    def close(self) -> None: ...


class CgroupManager(Protocol):
    name: str

    def create(self, limits: Limits) -> CgroupGroup: ...
    def leftover_groups(self) -> int: ...
    def cleanup(self) -> None: ...


def _children(path: Path) -> int:
    try:
        return sum(1 for p in path.iterdir() if p.is_dir())
    except OSError:
        return 0


def sweep_stale(bases: list[Path]) -> int:
    """Remove groups left by processes that died without cleaning up (killing anything still inside)."""
    removed = 0
    for base in bases:
        try:
            candidates = [p for p in base.iterdir() if p.name.startswith("posttrain-sandbox-")]
        except OSError:
            continue
        for prefix in candidates:
            owner = prefix.name.rsplit("-", 1)[-1]
            if not owner.isdigit() or Path(f"/proc/{owner}").exists():
                continue
            try:
                leaves = [p for p in prefix.iterdir() if p.is_dir()]
            except OSError:
                continue  # another process swept it first
            for leaf in leaves:
                try:
                    _kill_and_wait([leaf], 2.0)
                    _rmdir(leaf)
                except (OSError, RuntimeError):
                    continue
            _remove_empty(prefix)
            removed += 1
    return removed


def _remove_prefix(prefix: Path) -> None:
    """Kill whatever is left in the groups under `prefix`, remove them, then `prefix` itself."""
    try:
        leaves = [p for p in prefix.iterdir() if p.is_dir()]
    except OSError:
        return
    for leaf in leaves:
        with contextlib.suppress(OSError, RuntimeError):
            _kill_and_wait([leaf], 2.0)
            _rmdir(leaf)
    _remove_empty(prefix)


def cleanup_all() -> None:
    """Remove this process's groups in every hierarchy (at exit, after the spares are discarded)."""
    for manager in _MANAGERS:
        manager.cleanup()


def _remove_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _value_of(data: bytes, key: bytes) -> int:
    """The integer on the `key value` line of a cgroup stats file (0 if absent or malformed)."""
    for line in data.split(b"\n"):
        name, _, value = line.partition(b" ")
        if name == key:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


class _Counter:
    """One `key value` line of a cgroup stats file, read through a descriptor kept open.

    A run reads its group's OOM counter twice; `pread` on an open descriptor is one system call
    where opening the path again costs a lookup, an open and a close each time.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key.encode()
        self.fd: int | None = None

    def read(self) -> int:
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            data = os.pread(self.fd, 8192, 0)
        except OSError:
            return 0
        return _value_of(data, self.key)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _procs(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _kill_and_wait(dirs: list[Path], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        pids = sorted({pid for d in dirs for pid in _procs(d)})
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if timeout_s <= 0:
            return  # signal only; a later kill_all with a timeout confirms the group is empty
        if time.monotonic() > deadline:
            raise RuntimeError(f"cgroup {dirs[0]} still has processes {pids} after SIGKILL")
        time.sleep(0.002)


def _rmdir(path: Path) -> None:
    for _ in range(200):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.005)  # the last exiting task may not have been uncharged yet
    path.rmdir()


@dataclass
class V1Group:
    dirs: dict[str, Path]  # controller -> directory
    cpu_capped: bool = False
    _oom: _Counter | None = field(default=None, repr=False)

    def set_limits(self, limits: Limits) -> None:
        memory = self.dirs["memory"]
        swap = memory / "memory.memsw.limit_in_bytes"
        if swap.exists():  # memsw must stay >= the memory limit, so order the two writes accordingly
            order = [swap, memory / "memory.limit_in_bytes"]
            if limits.memory_bytes <= _read_int(memory / "memory.limit_in_bytes"):
                order.reverse()
            for path in order:
                _write(path, str(limits.memory_bytes))
        else:
            _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
        _write(self.dirs["pids"] / "pids.max", str(limits.pids))
        if "cpu" in self.dirs:
            period = _read_int(self.dirs["cpu"] / "cpu.cfs_period_us", 100000)
            quota = -1 if limits.cpu_quota is None else max(1000, int(limits.cpu_quota * period))
            _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        self.cpu_capped = limits.cpu_quota is not None

    def attach_paths(self) -> list[str]:
        """Only the hierarchies that limit something: each join is a task migration, which costs."""
        wanted = ["memory", "pids"] + (["cpu"] if self.cpu_capped else [])
        return [str(self.dirs[c] / "cgroup.procs") for c in wanted if c in self.dirs]

    def pids(self) -> list[int]:
        return sorted({pid for d in self.dirs.values() for pid in _procs(d)})

    def oom_kills(self) -> int:
        if self._oom is None:
            self._oom = _Counter(self.dirs["memory"] / "memory.oom_control", "oom_kill")
        return self._oom.read()

    def kill_all(self, timeout_s: float = 5.0) -> None:
        _kill_and_wait(list(self.dirs.values()), timeout_s)

    def close(self) -> None:
        self.kill_all()
        if self._oom is not None:
            self._oom.close()
        for path in self.dirs.values():
            _rmdir(path)


@dataclass
class V1Manager:
    """Hybrid or legacy hosts: one directory per controller hierarchy."""

    mounts: dict[str, Path]  # controller -> hierarchy dir where this process sits
    name: str = "cgroup-v1"
    prefix: str = field(default_factory=lambda: f"posttrain-sandbox-{os.getpid()}")

    def leftover_groups(self) -> int:
        return sum(_children(base / self.prefix) for base in set(self.mounts.values()))

    def cleanup(self) -> None:
        for base in set(self.mounts.values()):
            _remove_prefix(base / self.prefix)

    def create(self, limits: Limits) -> V1Group:
        leaf = f"sb{next(_COUNTER)}"
        dirs: dict[str, Path] = {}
        try:
            for controller, base in self.mounts.items():
                path = base / self.prefix / leaf
                path.mkdir(parents=True, exist_ok=True)
                dirs[controller] = path
            group = V1Group(dirs)
            group.set_limits(limits)
        except BaseException:  # not only OSError: a limit may not even format (inf, overflow)
            V1Group(dirs).close()
            raise
        return group


@dataclass
class V2Group:
    path: Path
    _oom: _Counter | None = field(default=None, repr=False)

    def set_limits(self, limits: Limits) -> None:
        _write(self.path / "memory.max", str(limits.memory_bytes))
        if (self.path / "memory.swap.max").exists():
            _write(self.path / "memory.swap.max", "0")
        _write(self.path / "pids.max", str(limits.pids))
        if (self.path / "cpu.max").exists():
            quota = "max" if limits.cpu_quota is None else str(max(1000, int(limits.cpu_quota * 100000)))
            _write(self.path / "cpu.max", f"{quota} 100000")

    def attach_paths(self) -> list[str]:
        return [str(self.path / "cgroup.procs")]

    def pids(self) -> list[int]:
        return _procs(self.path)

    def oom_kills(self) -> int:
        if self._oom is None:
            self._oom = _Counter(self.path / "memory.events", "oom_kill")
        return self._oom.read()

    def kill_all(self, timeout_s: float = 5.0) -> None:
        kill_file = self.path / "cgroup.kill"
        if kill_file.exists() and _procs(self.path):
            _write(kill_file, "1")
        _kill_and_wait([self.path], timeout_s)

    def close(self) -> None:
        self.kill_all()
        if self._oom is not None:
            self._oom.close()
        _rmdir(self.path)


@dataclass
class V2Manager:
    """Unified hierarchy: one directory, controllers enabled in the parents' subtree_control."""

    root: Path
    name: str = "cgroup-v2"
    prefix: str = field(default_factory=lambda: f"posttrain-sandbox-{os.getpid()}")

    def leftover_groups(self) -> int:
        return _children(self.root / self.prefix)

    def cleanup(self) -> None:
        _remove_prefix(self.root / self.prefix)

    def create(self, limits: Limits) -> V2Group:
        parent = self.root / self.prefix
        if not parent.exists():
            parent.mkdir()
            for level in (self.root, parent):
                _enable_controllers(level)
        path = parent / f"sb{next(_COUNTER)}"
        path.mkdir()
        try:
            V2Group(path).set_limits(limits)
        except BaseException:  # not only OSError: a limit may not even format (inf, overflow)
            V2Group(path).close()
            raise
        return V2Group(path)


def _enable_controllers(level: Path) -> None:
    available = (level / "cgroup.controllers").read_text().split()
    wanted = [c for c in ("memory", "pids", "cpu") if c in available]
    enabled = (level / "cgroup.subtree_control").read_text().split()
    missing = " ".join(f"+{c}" for c in wanted if c not in enabled)
    if missing:
        _write(level / "cgroup.subtree_control", missing)


def _mounts(mountinfo: str) -> tuple[Path | None, dict[str, Path]]:
    """(unified mount point, {v1 controller: mount point}) from /proc/self/mountinfo text."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        if rfields[0] == "cgroup2" and unified is None:
            unified = Path(fields[4])
        elif rfields[0] == "cgroup":
            for option in rfields[2].split(","):
                if option in ("memory", "pids", "cpu"):
                    v1[option] = Path(fields[4])
    return unified, v1


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """{controller or '' for unified: path} from /proc/self/cgroup text."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def detect(proc_root: Path = Path("/proc/self")) -> tuple[CgroupManager | None, str]:
    """Pick the cgroup backend for this host; returns (manager or None, one-line reason)."""
    try:
        unified, v1 = _mounts((proc_root / "mountinfo").read_text())
        own = _own_paths((proc_root / "cgroup").read_text())
    except OSError as exc:
        return None, f"cannot read cgroup info: {exc}"
    if unified is not None:
        controllers = _read_text(unified / "cgroup.controllers").split()
        if {"memory", "pids"} <= set(controllers) and os.access(unified, os.W_OK):
            sweep_stale([unified])
            _MANAGERS.append(V2Manager(unified))
            return _MANAGERS[-1], f"cgroup v2 at {unified} ({' '.join(controllers)})"
    if "memory" in v1 and "pids" in v1:
        mounts = {c: m / own.get(c, "/").lstrip("/") for c, m in v1.items()}
        if all(os.access(p, os.W_OK) for p in mounts.values()):
            sweep_stale(list(set(mounts.values())))
            _MANAGERS.append(V1Manager(mounts))
            return _MANAGERS[-1], "cgroup v1 (" + ", ".join(f"{c}:{p}" for c, p in mounts.items()) + ")"
        return None, "cgroup v1 controllers are mounted but not writable"
    return None, "no cgroup memory+pids controllers available (rlimits only)"


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
