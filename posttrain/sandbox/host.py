"""What this host can do for isolation, probed once per process (`host_features()`).

Guarantees: probing never raises; each feature comes with a one-line reason, and `backend_for` picks the
backend a spec will get (or says why none fits) with the same rules `posttrain sandbox check` prints.
Not here: launching sandboxes.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

from posttrain.sandbox.cgroups import CgroupManager, detect
from posttrain.sandbox.seccomp import build_filter

SANDBOX_HOST_UID = 200000
"""Host uid sandboxed processes run as when the launcher starts as root (unused by anything else)."""


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
        """Host uid to drop to before bwrap, or None to run bwrap as the current user."""
        if os.geteuid() == 0 and self.userns_unprivileged and self.setpriv:
            return SANDBOX_HOST_UID
        return None

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
                "unprivileged (sandbox runs as a dedicated host uid)"
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
