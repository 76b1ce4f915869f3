"""Command lines and process start-up shared by the bwrap and local backends, plus result classification.

A sandboxed process starts as `/bin/sh -c GATE sh CMD...`: the gate joins the sandbox's cgroups and sets
the rlimits before anything untrusted exists, then execs (setpriv ->) bwrap -> the program or the
supervisor. A one-shot run normally finds that chain already started and waiting (`parked.py`), so the
gate, the uid drop and the cgroup join are off its critical path. Processes are started with
`posix_spawn`, so a large host process is never forked.
Guarantees: the sandbox gets exactly the environment built here (no host variable leaks in unless
allow-listed); `classify` maps a raw outcome to exactly one status and reports `sandbox_error` only for
infrastructure failures (an OOM kill in the sandbox's cgroup during the run is `memory_limit` even when
it took the supervisor). Not here: the persistent supervisor protocol (`session.py`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import signal
from dataclasses import dataclass
from typing import Any, Protocol

from posttrain.sandbox.capture import collect, drain_closed_pipe
from posttrain.sandbox.cgroups import CgroupGroup
from posttrain.sandbox.host import HostFeatures
from posttrain.sandbox.images import Rootfs, python_binds
from posttrain.sandbox.seccomp import build_filter
from posttrain.sandbox.spec import ExecResult, SandboxSpec
from posttrain.sandbox.workspace import Workspace

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INNER_WORKDIR = "/workspace"
SUPERVISOR_MOUNT = "/.sandbox/supervisor.py"
CAPTURE_MOUNT = "/.sandbox/capture.py"  # imported by the supervisor from its own directory
SEC_FD, STATUS_FD, BLOCK_FD, COMMAND_FD = 3, 4, 5, 6
SUPERVISOR_SLACK_MB = 32
"""Memory the supervisor and bwrap may use on top of the program's budget."""


class ParkedLauncher(Protocol):
    """What a one-shot run needs from a launcher started ahead of it (implemented in `parked.py`)."""

    def go(self, ctx: Context, argv: list[str]) -> Spawned | None:
        """Start `argv` through the launcher; None (the launcher discarded) if it does not fit the run."""

    def discard(self) -> None:
        """Kill the waiting launcher and reap it."""


@dataclass
class Context:
    """Everything needed to start processes for one sandbox."""

    spec: SandboxSpec
    backend: str  # "bwrap" | "local"
    features: HostFeatures
    workspace: Workspace
    cgroup: CgroupGroup | None
    rootfs: Rootfs | None
    parked: ParkedLauncher | None = None
    """A one-shot launcher already started for this context (taken by the next one-shot run)."""
    ran_oneshot: bool = False
    """Whether a one-shot run used this context (then a launcher is parked for it when it is recycled)."""

    @property
    def isolated(self) -> bool:
        return self.backend == "bwrap"

    @property
    def host_uid(self) -> int | None:
        """The host uid this sandbox's processes run as (its own, see `host.UID_SLOTS`); None: unchanged."""
        if self.isolated and self.features.run_as_uid is not None:
            return self.workspace.owner_uid
        return None


def program_env(ctx: Context, extra: dict[str, str] | None = None) -> dict[str, str]:
    home = INNER_WORKDIR if ctx.isolated else str(ctx.workspace.work)
    _, python_bin = python_binds()
    path = f"{SANDBOX_PATH}:{python_bin}" if python_bin else SANDBOX_PATH
    env = {"PATH": path, "HOME": home, "TMPDIR": "/tmp" if ctx.isolated else str(ctx.workspace.tmp)}
    env["LANG"] = "C.UTF-8"
    env.update({k: os.environ[k] for k in ctx.spec.env_allowlist if k in os.environ})
    env.update(ctx.spec.env)
    env.update(extra or {})
    return env


def rlimits(spec: SandboxSpec) -> list[tuple[str, int, int]]:
    cpu = max(1, math.ceil(spec.cpu_limit_s))
    fsize = spec.disk_mb << 20
    return [
        ("RLIMIT_CPU", cpu, cpu + 1),
        ("RLIMIT_FSIZE", fsize, fsize),
        ("RLIMIT_NOFILE", spec.nofile, spec.nofile),
        ("RLIMIT_CORE", 0, 0),
    ]


def gate_script(cgroup: CgroupGroup | None, limits: list[tuple[str, int, int]]) -> str:
    """dash script: join the cgroup, set rlimits, exec "$@"."""
    lines = [
        f"echo $$ > {shlex.quote(path)} || exit 125" for path in (cgroup.attach_paths() if cgroup else [])
    ]
    flags = {"RLIMIT_CPU": "-t", "RLIMIT_FSIZE": "-f", "RLIMIT_NOFILE": "-n", "RLIMIT_CORE": "-c"}
    for name, soft, hard in limits:
        scale = 512 if name in ("RLIMIT_FSIZE", "RLIMIT_CORE") else 1  # dash counts these in 512-byte blocks
        lines.append(
            f"ulimit -S {flags[name]} {soft // scale} && ulimit -H {flags[name]} {hard // scale} || exit 125"
        )
    lines.append('exec "$@"')
    return "\n".join(lines)


def bwrap_argv(
    ctx: Context,
    command: list[str],
    persistent: bool,
    extra_binds: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> list[str]:
    """The full launch argv; a one-shot run's environment (`program_env` plus `env`) is set by bwrap."""
    argv = bwrap_options(ctx, persistent, extra_binds)
    if not persistent:
        argv += setenv_args(program_env(ctx, env))
    return [*argv, "--", *command]


def bwrap_options(ctx: Context, persistent: bool, extra_binds: tuple[str, ...] = ()) -> list[str]:
    """(setpriv ->) bwrap with every isolation option, up to but excluding the environment and command."""
    features = ctx.features
    assert features.bwrap is not None and ctx.rootfs is not None
    argv: list[str] = []
    if ctx.host_uid is not None and features.setpriv:
        uid = ctx.host_uid
        argv += [features.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    argv += [features.bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"]
    argv += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    argv += list(ctx.rootfs.args) + list(extra_binds)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--bind", str(ctx.workspace.work), INNER_WORKDIR, "--bind", str(ctx.workspace.tmp), "/tmp"]
    argv += ["--remount-ro", "/", "--chdir", INNER_WORKDIR, "--json-status-fd", str(STATUS_FD)]
    if persistent:
        # Runs share the sandbox's /dev: only its read-only top is shared, each run mounts its own
        # /dev/shm and devpts (supervisor.py), so no run can leave anything there for the next.
        argv += ["--remount-ro", "/dev"]
    if persistent:
        # The supervisor makes each run's own namespaces (a nested user namespace included) and loads
        # the filter from SEC_FD in the run's process itself; see supervisor.py.
        argv += ["--as-pid-1"]
    elif features.seccomp:
        argv += ["--seccomp", str(SEC_FD)]
    return argv


def setenv_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--setenv", key, value)]


@dataclass
class Spawned:
    pid: int
    stdin: int
    stdout: int
    stderr: int
    status: int | None  # read end of bwrap's --json-status-fd
    block: int | None = None  # write end of bwrap's --block-fd pipe (parked launchers only)
    command: int | None = None  # write end of the pipe the trampoline reads its command from (ditto)


def spawn(
    ctx: Context,
    argv: list[str],
    limits: list[tuple[str, int, int]],
    env: dict[str, str],
    launcher_pipes: bool = False,
) -> Spawned:
    """posix_spawn the gate with fresh pipes on 0/1/2 (+ seccomp, status, and block and command fds)."""
    pipes = [os.pipe() for _ in range(3)]
    child_ends = [pipes[0][0], pipes[1][1], pipes[2][1]]
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds()]
    actions += [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(child_ends)]
    extra: list[int] = []
    status_r = block_w = command_w = None
    if ctx.isolated:
        sec_r, sec_w = os.pipe()
        bpf = build_filter(deny_inet=ctx.spec.network == "none")
        os.write(sec_w, bpf or b"")
        os.close(sec_w)
        status_r, status_w = os.pipe()
        actions += [(os.POSIX_SPAWN_DUP2, sec_r, SEC_FD), (os.POSIX_SPAWN_DUP2, status_w, STATUS_FD)]
        extra = [sec_r, status_w]
    if launcher_pipes:
        block_r, block_w = os.pipe()
        command_r, command_w = os.pipe()
        if ctx.host_uid is not None:  # the trampoline reopens it via /proc/self/fd
            os.fchown(command_r, ctx.host_uid, ctx.host_uid)
        actions += [(os.POSIX_SPAWN_DUP2, block_r, BLOCK_FD), (os.POSIX_SPAWN_DUP2, command_r, COMMAND_FD)]
        extra += [block_r, command_r]
    script = gate_script(ctx.cgroup, limits)
    if not ctx.isolated:
        script = f"cd {shlex.quote(str(ctx.workspace.work))} || exit 125\n" + script
    gate = ["/bin/sh", "-c", script, "sh", *argv]
    try:
        pid = os.posix_spawn(
            gate[0], gate, env, file_actions=actions, setsid=True,
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM),
        )  # fmt: skip
    finally:
        for fd in [*child_ends, *extra]:
            os.close(fd)
    return Spawned(pid, pipes[0][1], pipes[1][0], pipes[2][0], status_r, block_w, command_w)


def _inheritable_fds() -> list[int]:
    """Inheritable fds above 2 in this process (e.g. left open by whatever started it).

    posix_spawn passes them on, and bwrap does not close them, so a one-shot program would get them.
    """
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found = []
    for name in names:
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                found.append(fd)
        except OSError:
            continue  # the directory listing's own fd, already closed
    return found


def read_status(fd: int | None) -> dict[str, Any]:
    """Merge bwrap's JSON status documents ({} when not bwrap)."""
    if fd is None:
        return {}
    merged: dict[str, Any] = {}
    for line in drain_closed_pipe(fd).decode(errors="replace").splitlines():
        try:
            merged.update(json.loads(line))
        except json.JSONDecodeError:
            continue
    return merged


def run_oneshot(
    ctx: Context,
    argv: list[str],
    stdin: bytes,
    timeout_s: float,
    wait_empty: bool = True,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one program in a fresh bwrap (or a plain process group for `local`); blocking.

    `env` adds to (or overrides) the spec's environment, as for a persistent run. With `wait_empty`
    the cgroup is confirmed empty before returning; without, stragglers are only signalled (the
    caller discards or re-verifies the group). A parked launcher is used only without `env` (its
    environment was fixed when it was parked).
    """
    ctx.ran_oneshot = True
    launcher, ctx.parked = ctx.parked, None
    if launcher is not None and env:
        launcher.discard()
        launcher = None
    proc = launcher.go(ctx, argv) if launcher is not None else None
    if proc is None:
        spawn_env = program_env(ctx, env) if not ctx.isolated else {"PATH": SANDBOX_PATH}
        command = bwrap_argv(ctx, argv, persistent=False, env=env) if ctx.isolated else argv
        proc = spawn(ctx, command, rlimits(ctx.spec), spawn_env)
    request = {"timeout_s": timeout_s, "max_output": ctx.spec.max_output_bytes,
               "output_limit": ctx.spec.output_limit_mb << 20}  # fmt: skip

    def kill_all() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if ctx.cgroup is not None:
            ctx.cgroup.kill_all(timeout_s=5.0 if wait_empty else 0.0)

    reply = collect(proc.pid, proc.stdin, proc.stdout, proc.stderr, stdin, request, kill_all)
    status = read_status(proc.status)
    if ctx.isolated:
        _fix_bwrap_reply(reply, status)
    elif reply["exit_code"] == 125:
        reply["error"] = "could not join the cgroup or set rlimits"
    return reply


def _fix_bwrap_reply(reply: dict[str, Any], status: dict[str, Any]) -> None:
    """bwrap reports a killed child as 128+signal and writes no exit-code if the child never ran."""
    if reply["timed_out"] or reply["output_killed"]:
        return
    if "exit-code" not in status:
        if reply["exit_code"] == 125:
            reply["error"] = "could not join the cgroup or set rlimits"
        elif b"bwrap: execvp" in reply["_err"]:
            reply["exit_code"] = 127  # the program does not exist: the program's failure
        else:
            reply["error"] = "bwrap failed: " + reply["_err"][-400:].decode(errors="replace").strip()
        return
    code = int(status["exit-code"])
    if 128 < code <= 128 + 64:
        reply["exit_code"], reply["signal"] = None, code - 128
    else:
        reply["exit_code"], reply["signal"] = code, None


def classify(reply: dict[str, Any], spec: SandboxSpec, oom_kills: int) -> ExecResult:
    common = {
        "stdout": reply.get("_out", b""), "stderr": reply.get("_err", b""),
        "stdout_bytes": reply.get("stdout_total", 0), "stderr_bytes": reply.get("stderr_total", 0),
        "wall_ms": reply.get("wall_ms", 0.0), "cpu_ms": reply.get("cpu_ms", 0.0),
        "peak_memory_mb": reply.get("maxrss_kb", 0) / 1024.0,
        "exit_code": reply.get("exit_code"), "signal": reply.get("signal"),
    }  # fmt: skip
    if reply.get("error"):
        if oom_kills > 0:
            # The OOM killer acted in the sandbox's own cgroup during the run: whatever it took (the
            # supervisor included), the program ran out of memory, which is the model's outcome.
            note = f"memory limit {spec.memory_mb} MB (the sandbox was killed: {reply['error']})"
            return ExecResult(status="memory_limit", error=note, wall_ms=common["wall_ms"])
        return ExecResult(status="sandbox_error", error=str(reply["error"]), wall_ms=common["wall_ms"])
    sig, code = reply.get("signal"), reply.get("exit_code")
    if reply.get("timed_out"):
        status, note = "timeout_wall", f"wall-clock limit {spec.timeout_s}s"
    elif reply.get("output_killed"):
        status, note = "output_limit", f"more than {spec.output_limit_mb} MB of output"
    elif oom_kills > 0 and code != 0:
        status, note = "memory_limit", f"memory limit {spec.memory_mb} MB"
    elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and common["cpu_ms"] >= 950 * spec.cpu_limit_s):
        status, note = "timeout_cpu", f"CPU-time limit {spec.cpu_limit_s}s"
    elif code == 0:
        status, note = "ok", ""
    else:
        status, note = "runtime_error", ""
    return ExecResult(status=status, error=note, **common)  # type: ignore[arg-type]


def cgroup_memory_bytes(spec: SandboxSpec) -> int:
    return (spec.memory_mb + spec.disk_mb + SUPERVISOR_SLACK_MB) << 20
