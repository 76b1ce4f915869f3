"""One-shot launchers started before their run is known, so a cold run skips most of its start-up.

A one-shot run starts, in series, a shell that joins the sandbox's cgroups and sets its rlimits, `setpriv`
(the uid drop) and bwrap, which then creates five namespaces and some 25 mounts. On cgroup v1 each
join waits for an RCU grace period — 5–20 ms on a loaded 2-core host, more than a bare
`python3 -c pass` — and every step waits in the run queue. A parked launcher is that same chain started
ahead of time and stopped at bwrap's `--block-fd`, i.e. after all of that: it already sits in the
cgroup, under the rlimits, as the sandbox uid, in its namespaces with its mounts, its seccomp filter
waiting to be loaded. `go` unblocks it and sends the program's argv on a pipe that a fixed `sh`
trampoline inside the sandbox sources (`. /dev/fd/6`) before it execs the program.

Guarantees: every isolation option, bind and environment variable is on the launcher's own argv, so the
command pipe can only choose the program, never the isolation; a command cut short (the host died
mid-write) is a shell syntax error or runs nothing, never a truncated argv; a launcher is used only for
a run whose gate script (cgroup paths, rlimits), bwrap options, environment and seccomp mode equal
those it was started with; otherwise it is killed and the run starts the normal way. Its binds were
made when it was parked, so it must be used before anything remounts the workspace (only `run_sync`
uses one, right after taking the spare). Not here: when launchers are parked (`spares.py`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from dataclasses import dataclass

from posttrain.sandbox.images import BASE_IMAGE
from posttrain.sandbox.launch import (
    BLOCK_FD,
    COMMAND_FD,
    SANDBOX_PATH,
    Context,
    Spawned,
    bwrap_options,
    gate_script,
    program_env,
    rlimits,
    setenv_args,
    spawn,
)

TRAMPOLINE = f". /dev/fd/{COMMAND_FD}"
"""dash reads a sourced file in blocks (its `read` builtin would go byte by byte)."""


def can_park(ctx: Context) -> bool:
    """Only the host rootfs is known to have the `/bin/sh` the trampoline needs."""
    return ctx.isolated and ctx.spec.rootfs is None and ctx.spec.image.split(":")[0] == BASE_IMAGE


def _launcher_argv(ctx: Context) -> list[str]:
    options = [*bwrap_options(ctx, persistent=False), *setenv_args(program_env(ctx))]
    return [*options, "--block-fd", str(BLOCK_FD), "--", "/bin/sh", "-c", TRAMPOLINE]


def _key(ctx: Context) -> tuple[str, ...]:
    return (gate_script(ctx.cgroup, rlimits(ctx.spec)), ctx.spec.network, *_launcher_argv(ctx))


def command_script(argv: list[str]) -> bytes:
    """Shell text for the trampoline: close the command fd, then exec `argv` exactly (shlex-quoted).

    The argv is first assigned as one quoted word and only then `exec`ed, so text cut off anywhere is an
    unterminated quote or a missing last line: nothing partial can run.
    """
    command = " ".join(shlex.quote(arg) for arg in argv)
    lines = [
        f"exec {COMMAND_FD}<&-",
        f"_pt_cmd={shlex.quote(command)}",
        'eval "unset _pt_cmd; exec $_pt_cmd"',
    ]
    return os.fsencode("\n".join(lines) + "\n")


@dataclass
class Parked:
    """A launcher waiting at bwrap's `--block-fd`; hand it a run with `go` or kill it with `discard`."""

    key: tuple[str, ...]
    proc: Spawned

    def go(self, ctx: Context, argv: list[str]) -> Spawned | None:
        """Start `argv` through this launcher; None (and the launcher discarded) if it does not fit the run."""
        proc = self.proc
        if self.key != _key(ctx) or proc.block is None or proc.command is None:
            self.discard()
            return None
        try:
            os.write(proc.block, b"g")
            os.close(proc.block)
            proc.block = None
            view = memoryview(command_script(argv))  # the trampoline drains it, so size is no limit
            while view:
                view = view[os.write(proc.command, view) :]
        except OSError:  # the launcher died while parked (e.g. killed with its cgroup)
            self.discard()
            return None
        os.close(proc.command)
        proc.command = None
        return proc

    def discard(self) -> None:
        """Kill the waiting launcher (it has run nothing of the program) and reap it."""
        proc = self.proc
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # bwrap and its child: setsid comes after the block
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, 0)
        for fd in (proc.stdin, proc.stdout, proc.stderr, proc.status, proc.block, proc.command):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        proc.block = proc.command = None


def park(ctx: Context) -> Parked | None:
    """Start a launcher for the next one-shot run of `ctx` (None where the trampoline cannot be used)."""
    if not can_park(ctx):
        return None
    proc = spawn(ctx, _launcher_argv(ctx), rlimits(ctx.spec), {"PATH": SANDBOX_PATH}, launcher_pipes=True)
    return Parked(_key(ctx), proc)
