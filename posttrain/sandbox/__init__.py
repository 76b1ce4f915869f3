"""Isolated, fast, snapshot-able execution of untrusted programs for rollouts and rewards.

`Sandbox` (one workspace; exec, files, snapshot/restore/fork), `SandboxPool` (warm sandboxes, recycled
between runs, callers queue when all are busy), `run_sync` (one program, no event loop). Isolation comes
from bubblewrap (namespaces, seccomp, read-only system dirs) plus cgroups and rlimits; the `local`
backend does not isolate and is refused unless `require_isolation=False`. See docs/sandbox.md for what is
and is not protected against.
"""

from posttrain.sandbox.pool import SandboxPool
from posttrain.sandbox.sandbox import Sandbox, SandboxSetupError, SandboxUnavailable, Snapshot, run_sync
from posttrain.sandbox.spec import ExecResult, SandboxSpec, Status

__all__ = [
    "ExecResult",
    "Sandbox",
    "SandboxPool",
    "SandboxSetupError",
    "SandboxSpec",
    "SandboxUnavailable",
    "Snapshot",
    "Status",
    "run_sync",
]
