"""In-sandbox supervisor (standard library only, with `capture.py` bound next to it).

Inside a bubblewrap sandbox this file is PID 1 of the sandbox's PID namespace
(`python3 -I -S supervisor.py`): it reads run requests from fd 0, execs each program in a child that
was forked, given its rlimits and left waiting in `/bin/sh` after the previous run (`Prepared`; a
plain fork where that cannot run the request exactly), collects head+tail output,
enforces the wall timeout, then kills every other process in the namespace and reaps them all before
it answers on fd 1. As PID 1 it cannot be signalled from inside the namespace, and it marks itself
non-dumpable so sandboxed code cannot read or write its memory. The host imports its protocol
(`HEADER`, `read_frame`) and its waiting-shell names.

Guarantees: after a reply, no process of the run is left (everything else in the namespace is killed
and reaped; the only other process is then the next prepared child, which has run nothing but this
file and the shell); output is bounded by `max_output` per stream; a program that prints more than `output_limit`
in total is killed. Not here: cgroups, namespaces, seccomp (set up by the host before this starts).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import select
import shlex
import signal
import stat
import struct
import sys
from typing import Any, BinaryIO

if __package__:
    from posttrain.sandbox.capture import collect, write_all
else:  # a script inside the sandbox (`python3 -I -S`), bound next to capture.py
    sys.path.insert(0, os.path.dirname(__file__))
    from capture import collect, write_all  # type: ignore[import-not-found, no-redef]

HEADER = struct.Struct(">I")
PREPARE_AFTER_MS = 2
"""How long the request stream must stay quiet after a reply before the next prepared child is forked."""


# ----------------------------------------------------------------------------- in-sandbox side


def _resolve(argv0: str, env: dict[str, str]) -> str:
    """PATH lookup done once in the parent, so the child has less to do between fork and exec."""
    if "/" in argv0:
        return argv0
    for directory in env.get("PATH", "/usr/bin:/bin").split(":"):
        candidate = os.path.join(directory or ".", argv0)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return ""


def _child_setup(limits: list[Any], stdin_r: int, out_w: int, err_w: int) -> None:
    """In a forked child: become a session leader on the run's pipes, apply rlimits and the OOM score."""
    os.setsid()
    os.dup2(stdin_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)  # every other supervisor fd is close-on-exec (PEP 446); see main()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # ignored signals would stay ignored across exec
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    for name, soft, hard in limits:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if _PRCTL is not None:
        _PRCTL(4, 1, 0, 0, 0)  # dumpable again so /proc/self is ours (exec would reset it anyway)
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")  # under memory pressure the OOM killer takes the program, not PID 1
        os.close(fd)


def _exec_or_exit(path: str, argv: list[str], env: dict[str, str]) -> None:
    try:
        if not path:
            raise FileNotFoundError(argv[0])
        os.execve(path, argv, env)
    except FileNotFoundError:
        os.write(2, f"sandbox: command not found: {argv[0]}\n".encode())
        os._exit(127)
    except BaseException as exc:  # noqa: BLE001 - the child must never return into the supervisor
        os.write(2, f"sandbox: cannot exec {argv[0]}: {exc}\n".encode())
        os._exit(126)


def _exec_child(request: dict[str, Any], path: str, stdin_r: int, out_w: int, err_w: int) -> None:
    """In the forked child: set up (see `_child_setup`), exec. Never returns."""
    try:
        _child_setup(request["rlimits"], stdin_r, out_w, err_w)
        os.chdir(request["cwd"])
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"sandbox: cannot start {request['argv'][0]}: {exc}\n".encode())
        os._exit(126)
    _exec_or_exit(path, request["argv"], request["env"])


class Prepared:
    """A child forked and set up between runs, waiting in `/bin/sh` for the next run's command.

    Forking the supervisor costs about 1 ms on a loaded host (page tables, copy-on-write faults, a trip
    through the run queue), and exec from a forked Python process costs another 1-2 ms here: the
    kernel tears down its copy of the interpreter's memory and the supervisor pays a copy-on-write
    fault (about 5 us) for every page it writes until then. A prepared child pays all of that
    between runs: it is forked after the previous run's processes were all killed and reaped, sets up
    (`_child_setup`) and execs `/bin/sh` (dash: a few hundred KiB), which blocks sourcing a pipe. A
    run writes its command there (`shell_command`) and the shell execs the program, an exec from a
    tiny process. It runs only a run with the same rlimits and cwd it applied, whose environment
    dash can pass on exactly and whose program the kernel can exec directly; anything else is forked
    for as usual.
    """

    def __init__(self, limits: list[Any], cwd: str) -> None:
        self.key = json.dumps([limits, cwd])
        stdin_r, self.stdin_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        cmd_r, self.cmd_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            _prepared_child(limits, (stdin_r, out_w, err_w), cmd_r)
        for fd in (stdin_r, out_w, err_w, cmd_r):
            os.close(fd)
        self.started = False

    def start(self, path: str, request: dict[str, Any]) -> tuple[int, int, int, int] | None:
        """Hand the run to the waiting shell: (pid, stdin, stdout, stderr) as `run_request` would
        make them, or None (and the child retired) where it must be forked for instead."""
        script = shell_command(path, request) if _order_key(request) == self.key else None
        if script is None:
            self.drop()
            return None
        try:
            write_all(self.cmd_w, script)
        except OSError:  # it died while waiting (e.g. OOM-killed between runs)
            self.drop()
            return None
        os.close(self.cmd_w)
        self.started = True
        return self.pid, self.stdin_w, self.out_r, self.err_r

    def drop(self) -> None:
        """Retire an unused child (EOF on its command pipe makes the shell exit) and reap it."""
        if self.started:
            return
        self.started = True
        for fd in (self.cmd_w, self.stdin_w, self.out_r, self.err_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


SHELL = "/bin/sh"
COMMAND_FD = 3
WAITER_ARGV = ["sh", "-c", f". /dev/fd/{COMMAND_FD}"]
"""A prepared child once it waits for its command (what `/proc/PID/cmdline` then shows)."""
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIRECT_EXEC = (b"\x7fELF", b"#!")


def shell_command(path: str, request: dict[str, Any]) -> bytes | None:
    """Shell text that runs `request` exactly as `os.execve(path, argv, env)` in its cwd would, or None.

    None where the shell would differ: an environment name it cannot export, no PATH (its default
    search path is not ours), a program that is not found or that the kernel cannot exec itself
    (dash would run a file without `#!` as a script; execve fails). The shell's own `PWD`/`OLDPWD` are
    unset before the environment is exported, so the program sees only `env`.
    """
    env, argv = request["env"], request["argv"]
    if not path or "PATH" not in env or not all(_SHELL_NAME.fullmatch(name) for name in env):
        return None
    if not _directly_executable(path):
        return None
    lines = [f"exec {COMMAND_FD}<&-", f"cd {shlex.quote(request['cwd'])} || exit 126", "unset PWD OLDPWD"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    lines.append("exec " + " ".join(shlex.quote(arg) for arg in argv))
    return os.fsencode("\n".join(lines) + "\n")


def _directly_executable(path: str) -> bool:
    """A regular file starting with an ELF or `#!` header (never blocks: a FIFO is refused unread)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 4).startswith(_DIRECT_EXEC)
    except OSError:
        return False
    finally:
        os.close(fd)


def _order_key(request: dict[str, Any]) -> str:
    return json.dumps([request["rlimits"], request["cwd"]])


def _prepared_child(limits: list[Any], pipes: tuple[int, int, int], cmd_r: int) -> None:
    """In a prepared child: set up, then wait in the shell for the run's command. Never returns."""
    try:
        _child_setup(limits, *pipes)
        os.dup2(cmd_r, COMMAND_FD)
        os.set_inheritable(COMMAND_FD, True)
        os.execve(SHELL, WAITER_ARGV, {})
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"sandbox: cannot prepare a child: {exc}\n".encode())
        os._exit(126)


def _kill_namespace() -> None:
    """As PID 1, SIGKILL every other process in the namespace (new forks die with their parents)."""
    for _ in range(3):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return


def run_request(
    request: dict[str, Any], stdin_data: bytes, prepared: Prepared | None = None
) -> dict[str, Any]:
    """Run one request: through `prepared` when it can take it, else in a child forked now."""
    path = _resolve(request["argv"][0], request["env"])
    started = prepared.start(path, request) if prepared is not None else None
    if started is not None:
        pid, stdin_w, out_r, err_r = started
    else:
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _exec_child(request, path, stdin_r, out_w, err_w)
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
    return collect(pid, stdin_w, out_r, err_r, stdin_data, request, _kill_namespace, reap_all=True)


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size > 0:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    raw = _read_exact(stream, HEADER.size)
    if raw is None:
        return None
    header_raw = _read_exact(stream, HEADER.unpack(raw)[0])
    if header_raw is None:
        return None
    header = json.loads(header_raw)
    size = int(header.get("stdin_len", 0))
    body = _read_exact(stream, size) if size else b""
    return None if body is None else (header, body)


def write_reply(stream: BinaryIO, reply: dict[str, Any]) -> None:
    out, err = reply.pop("_out", b""), reply.pop("_err", b"")
    reply["stdout_len"], reply["stderr_len"] = len(out), len(err)
    header = json.dumps(reply).encode()
    stream.write(HEADER.pack(len(header)) + header + out + err)
    stream.flush()


_PRCTL: Any = None


def _make_undumpable() -> None:
    global _PRCTL
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
    _PRCTL(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


def main() -> int:
    os.closerange(3, 65536)  # drop anything inherited from bwrap, so children inherit only 0/1/2
    _make_undumpable()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    requests, replies = os.fdopen(0, "rb", buffering=0), os.fdopen(1, "wb", buffering=0)
    write_reply(replies, {"ready": True, "pid": os.getpid()})
    prepared: Prepared | None = None
    shell = os.access(SHELL, os.X_OK)
    while True:
        try:
            frame = read_frame(requests)
        except ValueError as exc:
            _kill_namespace()
            write_reply(replies, {"error": f"supervisor: bad request: {exc}"})
            return 1
        if frame is None:
            return 0
        header, body = frame
        try:
            reply = run_request(header, body, prepared)
        except Exception as exc:  # noqa: BLE001 - reported to the host as an infrastructure failure
            _kill_namespace()
            if prepared is not None:
                prepared.drop()
            reply = {"error": f"supervisor: {type(exc).__name__}: {exc}"}
        prepared = None
        write_reply(replies, reply)
        if shell:
            prepared = _prepare_when_idle(header)


def _prepare_when_idle(header: dict[str, Any]) -> Prepared | None:
    """Fork the next prepared child once the host has had time to take the reply.

    Forking right after the reply would compete for the CPU the host is woken on (the scheduler tends
    to wake it where the supervisor runs), which delayed the reply's arrival by 0.5-0.9 ms. A request
    that arrives within the wait is run by an ordinary fork instead.
    """
    poller = select.poll()
    poller.register(0, select.POLLIN)
    if poller.poll(PREPARE_AFTER_MS):
        return None  # a request, or EOF, is already waiting
    try:
        return Prepared(header["rlimits"], header["cwd"])
    except (OSError, KeyError):
        return None


if __name__ == "__main__":
    sys.exit(main())
