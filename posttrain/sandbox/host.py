"""What this host can do for isolation, probed once per process (`host_features()`).

Guarantees: probing never raises; each feature comes with a one-line reason, and `backend_for` picks the
backend a spec will get (or says why none fits) with the same rules `posttrain sandbox check` prints.
When the launcher runs as root, `UID_SLOTS` gives every live sandbox its own host uid, so per-user kernel
budgets (POSIX message queues, inotify instances, RLIMIT_NPROC, ...) are per sandbox: a uid is held
through an `flock` on a lock file shared by every process of the host (the kernel drops it when its
holder dies), and is handed out again only when no process runs as it.
Not here: launching sandboxes.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import functools
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.sandbox.cgroups import CgroupManager, detect
from posttrain.sandbox.seccomp import build_filter

SANDBOX_HOST_UID = 200000
"""Host uid of the start-up probe; sandboxes run as the uids just above it (`UID_SLOTS`)."""
SANDBOX_UID_SLOTS = int(os.environ.get("POSTTRAIN_SANDBOX_UID_SLOTS", "8192"))
"""How many host uids (200001 onwards) sandboxes may take: the most sandboxes alive at once on the host,
over all processes (one per live sandbox, pooled slot, spare and parked launcher; a fork shares its
parent's)."""


class UidSlots:
    """Host uids for sandboxes, one per live sandbox across every process of the host.

    A uid is taken by `flock`ing `<lock_dir>/<uid>` (never unlinked, so two processes always lock the
    same inode) and skipping uids that some process still runs as. `retain` adds a holder in this
    process (a fork shares its parent's uid: its overlay's lower layers hold files owned by it).
    """

    def __init__(self, first: int, count: int, lock_dir: Path | None = None) -> None:
        self.uids = range(first, first + count)
        self._lock_dir = lock_dir
        self._held: dict[int, list[int]] = {}  # uid -> [lock fd, holders in this process]
        self._cursor = 0
        self._lock = threading.Lock()

    @property
    def lock_dir(self) -> Path:
        if self._lock_dir is None:
            from posttrain.sandbox.workspace import state_base  # state lives with the workspaces

            self._lock_dir = state_base() / "uids"
        self._lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self._lock_dir

    def acquire(self) -> int:
        """A uid no other live sandbox (of any process) has; OSError(EAGAIN) when all are taken."""
        with self._lock:
            busy = uids_with_processes(self.uids)
            for step in range(len(self.uids)):
                uid = self.uids[(self._cursor + step) % len(self.uids)]
                if uid in self._held or uid in busy:
                    continue
                fd = self._try_lock(uid)
                if fd is not None:
                    self._held[uid] = [fd, 1]
                    self._cursor = (uid - self.uids.start + 1) % len(self.uids)
                    return uid
        raise OSError(
            errno.EAGAIN, f"all {len(self.uids)} sandbox uids are in use (POSTTRAIN_SANDBOX_UID_SLOTS)"
        )

    def retain(self, uid: int) -> bool:
        """Add a holder to a uid this process holds; False if it holds it no longer."""
        with self._lock:
            if uid not in self._held:
                return False
            self._held[uid][1] += 1
            return True

    def release(self, uid: int) -> None:
        """Drop one holder; the last one unlocks the uid for every process."""
        with self._lock:
            entry = self._held.get(uid)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._held[uid]
                os.close(entry[0])  # closing the only descriptor of the lock file releases the flock

    def held(self) -> set[int]:
        with self._lock:
            return set(self._held)

    def _try_lock(self, uid: int) -> int | None:
        fd = os.open(self.lock_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd


def uids_with_processes(uids: range) -> set[int]:
    """Uids in `uids` that some process of the host runs as (real, effective, saved or filesystem uid)."""
    found: set[int] = set()
    try:
        entries = os.scandir("/proc")
    except OSError:
        return found
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/status", "rb") as status:
                    text = status.read(4096)
            except OSError:
                continue  # exited meanwhile
            start = text.find(b"\nUid:")
            if start >= 0:
                fields = text[start + 5 : text.find(b"\n", start + 5)].split()
                found.update(uid for uid in map(int, fields) if uid in uids)
    return found


UID_SLOTS = UidSlots(SANDBOX_HOST_UID + 1, SANDBOX_UID_SLOTS)


@dataclass
class HostFeatures:
    bwrap: str | None
    setpriv: str | None
    userns_unprivileged: bool
    userns_root: bool
    cgroups: CgroupManager | None
    cgroup_reason: str
    seccomp: bool
    tmpfs_quota: bool
    notes: list[str] = field(default_factory=list)

    @property
    def bwrap_usable(self) -> bool:
        return self.bwrap is not None and (self.userns_unprivileged or self.userns_root)

    @property
    def run_as_uid(self) -> int | None:
        """The probe's host uid when sandboxes drop to uids of their own (`UID_SLOTS`), else None (bwrap
        runs as the current user)."""
        if os.geteuid() == 0 and self.userns_unprivileged and self.setpriv:
            return SANDBOX_HOST_UID
        return None

    @property
    def uid_slots(self) -> UidSlots | None:
        """Where each isolated sandbox takes its own host uid, or None when there is no uid to drop to."""
        return UID_SLOTS if self.run_as_uid is not None else None

    def table(self) -> list[tuple[str, bool, str]]:
        return [
            (
                "bubblewrap",
                self.bwrap is not None,
                self.bwrap or "not installed (apt-get install bubblewrap)",
            ),
            (
                "user namespaces",
                self.bwrap_usable,
                "unprivileged (each sandbox runs as a host uid of its own)"
                if self.run_as_uid is not None
                else ("as the current user" if self.userns_root else "unavailable"),
            ),
            ("pid/net/ipc/uts/mount namespaces", self.bwrap_usable, "via bubblewrap"),
            ("cgroup limits", self.cgroups is not None, self.cgroup_reason),
            (
                "seccomp filter",
                self.seccomp,
                "built-in BPF deny list" if self.seccomp else "unknown architecture",
            ),
            (
                "workspace quota",
                self.tmpfs_quota,
                "per-sandbox tmpfs" if self.tmpfs_quota else "RLIMIT_FSIZE only",
            ),
        ]


def _probe_bwrap(bwrap: str, prefix: list[str]) -> bool:
    argv = [*prefix, bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, cwd="/")
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def host_features() -> HostFeatures:
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    unprivileged = root_ok = False
    if bwrap:
        if os.geteuid() == 0 and setpriv:
            drop = [
                setpriv,
                f"--reuid={SANDBOX_HOST_UID}",
                f"--regid={SANDBOX_HOST_UID}",
                "--clear-groups",
                "--",
            ]
            unprivileged = _probe_bwrap(bwrap, drop)
        if not unprivileged:
            root_ok = _probe_bwrap(bwrap, [])
            unprivileged = root_ok and os.geteuid() != 0
    manager, reason = detect()
    if manager is not None:
        atexit.register(manager.cleanup)
    features = HostFeatures(
        bwrap=bwrap,
        setpriv=setpriv,
        userns_unprivileged=unprivileged,
        userns_root=root_ok,
        cgroups=manager,
        cgroup_reason=reason,
        seccomp=build_filter(deny_inet=True) is not None,
        tmpfs_quota=os.geteuid() == 0,
    )
    if os.geteuid() == 0 and not unprivileged and root_ok:
        features.notes.append("sandboxed code runs as host root inside a user namespace; secrets are masked")
    return features


def backend_for(backend: str, require_isolation: bool) -> tuple[str | None, str]:
    """('bwrap' | 'local' | None, reason) for a spec's `backend` and `require_isolation`."""
    features = host_features()
    if backend in ("auto", "bwrap") and features.bwrap_usable:
        return "bwrap", "bubblewrap with namespaces"
    if backend == "bwrap":
        return None, "bubblewrap is not usable on this host"
    if require_isolation:
        return None, "isolation is required but bubblewrap is not usable; refusing the local backend"
    return "local", "LOCAL BACKEND: plain subprocess, NOT isolated"
