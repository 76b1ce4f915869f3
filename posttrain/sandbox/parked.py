"""One-shot launchers started before their run is known, so a cold run skips the slow part of start-up.

A one-shot run starts, in series, a shell that joins the sandbox's cgroups and sets its rlimits, `setpriv`
(the uid drop) and bwrap. On cgroup v1 each join waits for an RCU grace period — 5–20 ms on a loaded
2-core host, more than a bare `python3 -c pass` — and every extra exec waits in the run queue. A parked
launcher is that same chain started ahead of time and stopped where bwrap reads `--args FD`: it already
sits in the cgroup, under the rlimits, as the sandbox uid, with every isolation option on its own command
line. `go` sends only the program's environment and argv; a fixed `sh` trampoline inside the sandbox
execs the program (one exec of dash, about 1 ms, instead of the grace period and two host-side execs).

Guarantees: the args pipe can only add environment variables (`--setenv`), never an isolation option or
a bind, because every such option is on the launcher's argv before `--args`; if the pipe closes early
(the host died) the trampoline runs nothing. A launcher is used only for a run whose gate script (cgroup
paths, rlimits), bwrap options and seccomp mode equal those it was started with; otherwise it is killed
and the run starts the normal way. Not here: when launchers are parked (`spares.py`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from dataclasses import dataclass

from posttrain.sandbox.images import BASE_IMAGE
from posttrain.sandbox.launch import (
    ARGS_FD,
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

ARGV_VAR, GO_VAR = "POSTTRAIN_SANDBOX_ARGV", "POSTTRAIN_SANDBOX_GO"
TRAMPOLINE = f'[ "${GO_VAR}" = 1 ] || exit 125; eval "unset {ARGV_VAR} {GO_VAR}; exec ${ARGV_VAR}"'
"""The double-quoted string is expanded once, so eval parses exactly the shell-quoted argv (shlex.quote)."""
MAX_COMMAND_BYTES = 100_000
"""The quoted argv travels as one environment string, which execve caps at 128 KiB; longer runs start normally."""


def can_park(ctx: Context) -> bool:
    """Only the host rootfs is known to have the `/bin/sh` the trampoline needs."""
    return ctx.isolated and ctx.spec.rootfs is None and ctx.spec.image.split(":")[0] == BASE_IMAGE


def _launcher_argv(ctx: Context) -> list[str]:
    return [*bwrap_options(ctx, persistent=False), "--args", str(ARGS_FD), "--", "/bin/sh", "-c", TRAMPOLINE]


def _key(ctx: Context) -> tuple[str, ...]:
    return (gate_script(ctx.cgroup, rlimits(ctx.spec)), ctx.spec.network, *_launcher_argv(ctx))


def _args_data(env: dict[str, str], argv: list[str]) -> bytes | None:
    command = " ".join(shlex.quote(arg) for arg in argv)
    if len(command) > MAX_COMMAND_BYTES:
        return None
    # GO comes last, so a write cut off by the host dying never lets the trampoline run a partial argv.
    args = [*setenv_args(env), "--setenv", ARGV_VAR, command, "--setenv", GO_VAR, "1"]
    return b"".join(os.fsencode(arg) + b"\0" for arg in args)


@dataclass
class Parked:
    """A launcher waiting in bwrap's `--args` read; hand it a run with `go` or kill it with `discard`."""

    key: tuple[str, ...]
    proc: Spawned

    def go(self, ctx: Context, argv: list[str]) -> Spawned | None:
        """Start `argv` through this launcher; None (and the launcher discarded) if it does not fit the run."""
        data = _args_data(program_env(ctx), argv)
        if data is None or self.key != _key(ctx) or self.proc.args is None:
            self.discard()
            return None
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.proc.args, view) :]
        except OSError:  # the launcher died while parked (e.g. its cgroup was removed)
            self.discard()
            return None
        os.close(self.proc.args)
        self.proc.args = None
        return self.proc

    def discard(self) -> None:
        """Kill the waiting launcher (it has started nothing) and reap it."""
        proc = self.proc
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(proc.pid, 0)
        for fd in (proc.stdin, proc.stdout, proc.stderr, proc.status, proc.args):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        proc.args = None


def park(ctx: Context) -> Parked | None:
    """Start a launcher for the next one-shot run of `ctx` (None where the trampoline cannot be used)."""
    if not can_park(ctx):
        return None
    proc = spawn(ctx, _launcher_argv(ctx), rlimits(ctx.spec), {"PATH": SANDBOX_PATH}, args_pipe=True)
    return Parked(_key(ctx), proc)
