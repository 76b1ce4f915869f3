"""In-sandbox supervisor (standard library only, with `capture.py` bound next to it).

Inside a bubblewrap sandbox this file is PID 1 of the sandbox's PID namespace
(`python3 -I -S supervisor.py`): it reads run requests from fd 0 and runs each program in namespaces
made for that run alone (`_start_run`, one clone): a nested user namespace (same uid/gid 1000) with new mount, IPC
and PID namespaces, whose init (`_run_init`, PID 1 there) mounts a fresh `/proc`, a fresh size-capped
tmpfs on `/dev/shm` and a new devpts (the rest of `/dev` is read-only), forks the program's process
and exits with it. The program's process sets rlimits and the OOM score, loads the seccomp filter the
host passed on fd 3, and execs. That chain is started after the previous run (`Prepared`, which waits in `/bin/sh` for the command; a
plain start where that cannot run the request exactly). The supervisor collects head+tail output,
enforces the wall timeout, then kills every other process in the namespace and reaps them all before
it answers on fd 1. A program sees only its own run's PID namespace, so it cannot signal, prlimit,
renice, re-pin or ptrace the supervisor; the supervisor also ignores the usual job-control and
termination signals and marks itself non-dumpable. The host imports its protocol (`HEADER`,
`read_frame`) and its waiting-shell names.

Guarantees: every run starts with a new `/dev/shm` and `/dev/pts` (the rest of `/dev` is read-only),
new SysV IPC objects and POSIX message queues, a new `/proc`, and per-process attributes (rlimits, nice, affinity, I/O priority, OOM
score) inherited from the supervisor, never from an earlier run; after a reply, no process of the
run is left (the run's namespaces die with its init, and everything else in the sandbox's namespace is
killed and reaped; the only other processes are then the next prepared chain, which has run nothing but
this file and the shell); output is bounded by `max_output` per stream; a program that prints more than
`output_limit` in total is killed. Not here: cgroups, the sandbox's own namespaces (bwrap), building
the seccomp filter (the host).
"""

from __future__ import annotations

import contextlib
import ctypes
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
FILTER_FD = 3
"""Where the host passes the seccomp filter (raw `struct sock_filter` bytes; empty for none)."""
STATUS = struct.Struct("<i")
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x08000000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_SLAVE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 24, 38, 22, 2
IGNORED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
                   "SIGPROF", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE", "SIGXFSZ", "SIGXCPU")  # fmt: skip
"""What the supervisor ignores: none can reach it from a run, but none may end it by accident either."""
DEVPTS_OPTIONS = "newinstance,ptmxmode=0666,mode=620"


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


class _Kernel:
    """The few libc calls Python does not wrap (loaded once in `main`, inherited by every fork)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.prctl = libc.prctl
        self.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        self.mount_call = libc.mount
        self.mount_call.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.clone_nr = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
        self.filter: Any = None
        self.fprog: Any = None
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            self.last_cap = int(handle.read())

    def drop_bounding_set(self) -> None:
        """Empty the capability bounding set, as bwrap leaves it for the sandbox (a new user
        namespace starts with a full one)."""
        for cap in range(self.last_cap + 1):
            self.check(self.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capabilities")

    def check(self, result: int, what: str) -> None:
        if result != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def clone(self, flags: int) -> int:
        """fork(2) into new namespaces: the raw clone system call with `flags | SIGCHLD` and no new stack
        (the child continues on a copy of this one, as after fork). 0 in the child, its pid here.
        Python's own after-fork hooks do not run; the supervisor is single-threaded and registers none."""
        sigchld, zero = int(signal.SIGCHLD), ctypes.c_ulong(0)
        pid = int(self.syscall(ctypes.c_long(self.clone_nr), ctypes.c_ulong(flags | sigchld), zero, zero, zero, zero))
        if pid < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"clone: {os.strerror(err)}")
        return pid

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
        encode = lambda text: None if text is None else os.fsencode(text)  # noqa: E731
        self.check(self.mount_call(encode(source), encode(target), encode(fstype), flags, encode(data)),
                   f"mount {target}")  # fmt: skip

    def keep_filter(self, program: bytes) -> None:
        """Hold the filter in memory as a `struct sock_fprog`, ready for `load_filter` in every child."""
        if not program:
            return

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self.filter = ctypes.create_string_buffer(program, len(program))
        self.fprog = SockFprog(len(program) // 8, ctypes.addressof(self.filter))

    def load_filter(self) -> None:
        """no_new_privs, then the seccomp filter (when the host sent one): the last step before exec."""
        self.check(self.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if self.fprog is not None:
            address = ctypes.addressof(self.fprog)
            self.check(self.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, address, 0, 0), "seccomp")


_KERNEL: _Kernel | None = None


def _default_signals() -> None:
    """Every catchable signal back to its default (ignored ones would stay ignored across exec)."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_DFL)


def _child_setup(limits: list[Any], stdin_r: int, out_w: int, err_w: int) -> None:
    """In the program's process: a session leader on the run's pipes, with rlimits, OOM score, seccomp."""
    os.setsid()
    os.dup2(stdin_r, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)  # every other supervisor fd is close-on-exec (PEP 446); see main()
    _default_signals()
    for name, soft, hard in limits:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if _KERNEL is not None:
        _KERNEL.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # so /proc/self is ours (exec would reset it anyway)
        _write_file("/proc/self/oom_score_adj", "1000")  # the OOM killer takes the program first
        _KERNEL.load_filter()


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
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
    """In the program's process: set up (see `_child_setup`), exec. Never returns."""
    try:
        _child_setup(request["rlimits"], stdin_r, out_w, err_w)
        os.chdir(request["cwd"])
    except BaseException as exc:  # noqa: BLE001
        os.write(2, f"sandbox: cannot start {request['argv'][0]}: {exc}\n".encode())
        os._exit(126)
    _exec_or_exit(path, request["argv"], request["env"])


# ----------------------------------------------------------------------------- a run's own namespaces


class RunStart:
    """A run's init, started by `_start_run` in new namespaces, and the pipe its program's status
    (or, prefixed with "!", why the run could not start) comes on."""

    def __init__(self, init: int, status_r: int) -> None:
        self.init, self.status_r = init, status_r

    def init_pid(self) -> int:
        """The run's init (the supervisor's own child)."""
        return self.init


def _start_run(program: Any, dev_mb: int, close_in_init: tuple[int, ...]) -> RunStart:
    """Start the run's init directly in new user, mount, IPC and PID namespaces (one `clone`, so the
    supervisor forks once per run); the init runs `program` (a function that execs, in the program's
    process). See `RunStart`."""
    assert _KERNEL is not None
    uid, gid = os.getuid(), os.getgid()  # inside the new user namespace they read 65534 until mapped
    status_r, status_w = os.pipe()
    # One call, so the new user namespace owns the others and the mapped uid holds their caps.
    try:
        init = _KERNEL.clone(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID)
    except BaseException:
        os.close(status_r)
        os.close(status_w)
        raise
    if init == 0:  # the child: never returns into the supervisor
        try:
            os.close(status_r)
            _KERNEL.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its /proc/self files are its own only while dumpable
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except BaseException as exc:  # noqa: BLE001
            with contextlib.suppress(OSError):
                os.write(status_w, f"!{type(exc).__name__}: {exc}".encode())
            os._exit(125)
        _run_init(status_w, program, dev_mb, close_in_init)
    os.close(status_w)
    return RunStart(init, status_r)


def _run_init(status_w: int, program: Any, dev_mb: int, close_in_init: tuple[int, ...]) -> None:
    """PID 1 of a run: mount the run's /proc and /dev, fork the program's process, reap every process
    of the namespace until that one exits, write its wait status to `status_w` and exit (which kills
    whatever is left in the namespace and frees its mounts and IPC objects). Never returns."""
    try:
        assert _KERNEL is not None
        _default_signals()  # as a namespace's init, the default disposition makes them unreachable
        _KERNEL.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # /proc/self/oom_score_adj is ours only while dumpable
        _write_file("/proc/self/oom_score_adj", "1000")  # out of memory, the run dies before the supervisor
        _KERNEL.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # and then no program may read or trace this process
        _fresh_mounts(dev_mb)
        _write_file("/proc/sys/user/max_user_namespaces", "0")  # no nested user namespaces (besides seccomp)
        _KERNEL.drop_bounding_set()
        child = os.fork()
    except BaseException as exc:  # noqa: BLE001
        with contextlib.suppress(OSError):
            os.write(status_w, f"!{type(exc).__name__}: {exc}".encode())
        os._exit(125)
    if child == 0:
        os.close(status_w)
        program()
        os._exit(126)  # not reached: `program` execs or exits
    for fd in close_in_init:
        os.close(fd)
    os.closerange(0, 3)  # the supervisor's request and reply pipes
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(125)
        if pid == child:
            os.write(status_w, STATUS.pack(status))
            os._exit(0)


def _fresh_mounts(dev_mb: int) -> None:
    """In the run's new mount namespace: a /proc for its PID namespace, a new tmpfs on /dev/shm (capped
    at `dev_mb`, with the original directory's mode and owner) and a new devpts instance. The rest of
    /dev is read-only (bwrap remounts it so), so nothing else there can change between runs."""
    assert _KERNEL is not None
    _KERNEL.mount(None, "/", None, MS_REC | MS_SLAVE, None)  # nothing of the run propagates back
    _KERNEL.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    shm = os.stat("/dev/shm")
    options = f"mode={stat.S_IMODE(shm.st_mode):o},size={max(dev_mb, 1)}m,uid={shm.st_uid},gid={shm.st_gid}"
    _KERNEL.mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options)
    if os.path.isdir("/dev/pts"):
        _KERNEL.mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, DEVPTS_OPTIONS)


class Prepared:
    """A run's namespaces made and its program's process set up between runs, waiting in `/bin/sh`
    for the next run's command.

    Forking the supervisor costs about 1 ms on a loaded host (page tables, copy-on-write faults, a trip
    through the run queue), making a run's namespaces and mounts about as much again, and exec from a
    forked Python process costs another 1-2 ms here: the kernel tears down its copy of the
    interpreter's memory and the supervisor pays a copy-on-write fault (about 5 us) for every page it
    writes until then. A prepared chain pays all of that between runs: it is started after the
    previous run's processes were all killed and reaped (`_start_run`), its program's process sets up
    (`_child_setup`) and execs `/bin/sh` (dash: a few hundred KiB), which blocks sourcing a pipe. A
    run writes its command there (`shell_command`) and the shell execs the program, an exec from a
    tiny process. It runs only a run with the same rlimits, cwd and /dev size it applied, whose
    environment dash can pass on exactly and whose program the kernel can exec directly; anything
    else gets a chain started for it as usual.
    """

    def __init__(self, limits: list[Any], cwd: str, dev_mb: int) -> None:
        self.key = json.dumps([limits, cwd, dev_mb])
        stdin_r, self.stdin_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        cmd_r, self.cmd_w = os.pipe()
        pipes = (stdin_r, out_w, err_w)
        ours = (self.stdin_w, self.out_r, self.err_r, self.cmd_w)
        try:
            self.run = _start_run(lambda: _prepared_child(limits, pipes, cmd_r), dev_mb, (*pipes, cmd_r, *ours))
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in (stdin_r, out_w, err_w, cmd_r):
                os.close(fd)
        self.started = False

    def start(self, path: str, request: dict[str, Any]) -> tuple[int, int, int, int, int] | None:
        """Hand the run to the waiting shell: (init pid, stdin, stdout, stderr, status fd) as
        `run_request` would make them, or None (and the chain retired) where it must start its own."""
        script = shell_command(path, request) if _order_key(request) == self.key else None
        if script is None:
            self.drop()
            return None
        try:
            pid = self.run.init_pid()
        except OSError:
            self.started = True
            self._close(self.cmd_w, self.stdin_w, self.out_r, self.err_r)
            return None
        try:
            write_all(self.cmd_w, script)
        except OSError:  # it died while waiting (e.g. OOM-killed between runs)
            self.started = True
            self._close(self.cmd_w, self.stdin_w, self.out_r, self.err_r, self.run.status_r)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return None
        os.close(self.cmd_w)
        self.started = True
        return pid, self.stdin_w, self.out_r, self.err_r, self.run.status_r

    def drop(self) -> None:
        """Retire an unused chain (EOF on its command pipe makes the shell exit, then its init) and
        reap it."""
        if self.started:
            return
        self.started = True
        self._close(self.cmd_w, self.stdin_w, self.out_r, self.err_r)
        try:
            pid = self.run.init_pid()
        except OSError:
            return
        self._close(self.run.status_r)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    @staticmethod
    def _close(*fds: int) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


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
    return json.dumps([request["rlimits"], request["cwd"], _dev_mb(request)])


def _dev_mb(request: dict[str, Any]) -> int:
    return int(request.get("dev_mb", 64))


def _prepared_child(limits: list[Any], pipes: tuple[int, int, int], cmd_r: int) -> None:
    """In a prepared program's process: set up, then wait in the shell for the run's command. Never returns."""
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
    """Run one request: through `prepared` when it can take it, else in a chain started now."""
    path = _resolve(request["argv"][0], request["env"])
    started = prepared.start(path, request) if prepared is not None else None
    if started is not None:
        pid, stdin_w, out_r, err_r, status_r = started
    else:
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pipes = (stdin_r, out_w, err_w)
        try:
            run = _start_run(lambda: _exec_child(request, path, *pipes), _dev_mb(request),
                             (*pipes, stdin_w, out_r, err_r))  # fmt: skip
        finally:
            for fd in pipes:
                os.close(fd)
        try:
            pid, status_r = run.init_pid(), run.status_r
        except OSError:
            for fd in (stdin_w, out_r, err_r):
                os.close(fd)
            raise
    return collect(
        pid, stdin_w, out_r, err_r, stdin_data, request, _kill_namespace, reap_all=True, status_fd=status_r
    )


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


def _take_filter() -> bytes:
    """The seccomp filter the host wrote to `FILTER_FD` (empty where it sent none or the fd is closed)."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(FILTER_FD, 65536):
            chunks.append(chunk)
    except OSError:
        return b""
    return b"".join(chunks)


def main() -> int:
    global _KERNEL
    program = _take_filter()
    os.closerange(3, 65536)  # drop anything inherited from bwrap, so children inherit only 0/1/2
    _KERNEL = _Kernel()
    _KERNEL.keep_filter(program)
    _KERNEL.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for name in IGNORED_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    requests, replies = os.fdopen(0, "rb", buffering=0), os.fdopen(1, "wb", buffering=0)
    write_reply(replies, {"ready": True, "pid": os.getpid()})
    prepared: Prepared | None = None
    last: dict[str, Any] | None = None  # the last run's request: the shape of the next prepared run
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
        if header.get("op") == "refresh":
            # The host remounted the workspace or /tmp: a prepared run's mount namespace is a copy made
            # before that, so make a new one now (no reply; the host is not waiting for one).
            if prepared is not None:
                prepared.drop()
            prepared = _prepare(last) if shell and last is not None else None
            continue
        last = header
        try:
            reply = run_request(header, body, prepared)
        except Exception as exc:  # noqa: BLE001 - reported to the host as an infrastructure failure
            _kill_namespace()
            if prepared is not None:
                prepared.drop()
            _reap_all()
            reply = {"error": f"supervisor: {type(exc).__name__}: {exc}"}
        prepared = None
        write_reply(replies, reply)
        if shell:
            prepared = _prepare_when_idle(header)


def _reap_all() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


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
    return _prepare(header)


def _prepare(header: dict[str, Any]) -> Prepared | None:
    try:
        return Prepared(header["rlimits"], header["cwd"], _dev_mb(header))
    except (OSError, KeyError):
        return None


if __name__ == "__main__":
    sys.exit(main())
