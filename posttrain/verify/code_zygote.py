"""The program processes of `code_tests`'s harness: a zygote interpreter forks one per response (stdlib only).

Starting an interpreter and importing `typing` cost about 23 ms per response here, more than the tests;
HumanEval programs nearly all import `typing`. The harness parent therefore spawns one zygote per run
(`posix_spawn` of the same loader with the argument `zygote`: a fresh interpreter, so nothing of the
parent's memory, which holds the tests and the nonce), which imports `PRELOADED` once and then, per
request on its control socket, forks a child on a new socket pair and sends the parent the child's pid
and its own end of the pair (SCM_RIGHTS). The child keeps only /dev/null on 0-2 and its end on fd 3 and
runs `child_main` (waits for the program, runs it, answers calls). The zygote never receives a program
or a secret, so a child's memory holds neither the tests nor another response's program.

Guarantees: the zygote is non-dumpable (so are its children: a program cannot read or write another
process's memory through /proc); before each response the parent compares the zygote's limits, nice,
scheduling policy, CPU affinity, OOM score and autogroup (`proc_attributes`) with the values it had when
it started, and replaces a zygote that changed, stopped or died (nothing is charged for it: a zygote is
only a cache of an interpreter start). Not here: the checks of the parent itself (`code_guard.Guard`).
"""

from __future__ import annotations

import _signal
import _socket
import os

TYPE_CHECKING = False  # `typing` costs milliseconds to import, paid per run
if TYPE_CHECKING:
    from collections.abc import Callable

PRELOADED = ("typing", "collections", "re", "math", "itertools", "functools", "string", "heapq", "bisect")
"""Imported by the zygote once per run, for every child: what programs import most (and their imports)."""
READY_TIMEOUT_S = 30.0
"""How long a new zygote may take to start (an interpreter and `PRELOADED`)."""
_FD = 4
"""Bytes of one descriptor or pid in a message."""


def zygote_main(control_fd: int, child_main: Callable[[int, int], None], undumpable: Callable[[], None]) -> None:
    """The zygote's loop: fork a child per request byte until the parent closes the control socket."""
    undumpable()
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # no KeyboardInterrupt from a program's SIGINT (children reset it)
    for name in PRELOADED:
        try:  # noqa: SIM105 - contextlib would cost an import per run
            __import__(name)
        except ImportError:
            pass
    control = _socket.socket(fileno=control_fd)
    control.sendall(b"r")
    while control.recv(1):
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                ours.close()
                os.dup2(theirs.fileno(), 3)  # inheritable, unlike the original
                theirs.close()
                child_main(3, 3)
            finally:
                os._exit(0)
        theirs.close()
        control.sendmsg([pid.to_bytes(_FD, "little")],
                        [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, ours.fileno().to_bytes(_FD, "little"))])  # fmt: skip
        ours.close()
        os.waitpid(pid, 0)  # the parent kills it when its tests are done; its orphans go to the parent
    os._exit(0)


def proc_attributes(pid: int | str) -> tuple[bytes, ...]:
    """What a process passes on to its children that another process of the same user can change:
    rlimits, nice, real-time priority and policy (`/proc/<pid>/stat` fields 19, 40, 41), CPU affinity,
    OOM score adjustment, autogroup."""
    base = f"/proc/{pid}"
    stat = read_bytes(f"{base}/stat").rpartition(b")")[2].split()
    cpus = [line for line in read_bytes(f"{base}/status").splitlines() if line.startswith(b"Cpus_allowed_list")]
    fields = (stat[16], stat[37], stat[38]) if len(stat) > 38 else (b"?",)
    return (read_bytes(f"{base}/limits"), *fields, *cpus, read_bytes(f"{base}/oom_score_adj"),
            read_bytes(f"{base}/autogroup"))  # fmt: skip


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:
        return b""


def _state(pid: int) -> bytes:
    stat = read_bytes(f"/proc/{pid}/stat").rpartition(b")")[2].split()
    return stat[0] if stat else b"X"


class Zygote:
    """The parent's handle on its zygote: `fork()` a child (pid, socket fd); `ensure()` a usable zygote."""

    def __init__(self, argv: list[str], devnull: int) -> None:
        self.argv, self.devnull = argv, devnull
        self.pid = 0
        self.control: _socket.socket | None = None
        self.attributes: tuple[bytes, ...] = ()

    def ensure(self) -> None:
        """A started zygote that is running (not stopped, not dead) with the attributes it started with."""
        if self.pid:
            try:  # noqa: SIM105 - contextlib would cost an import per run
                os.kill(self.pid, _signal.SIGCONT)
            except OSError:  # dead, and reaped by the guard
                pass
        if not self.pid or _state(self.pid) in (b"T", b"t", b"Z", b"X") or proc_attributes(self.pid) != self.attributes:
            self.stop()
            self.start()

    def start(self) -> None:
        control, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        actions = [(os.POSIX_SPAWN_DUP2, self.devnull, fd) for fd in (0, 1, 2)]
        actions.append((os.POSIX_SPAWN_DUP2, theirs.fileno(), 3))
        try:
            self.pid = os.posix_spawn(self.argv[0], self.argv, dict(os.environ), file_actions=actions,
                                      setsigdef=(_signal.SIGPIPE, _signal.SIGINT))  # fmt: skip
        finally:
            theirs.close()
        self.control = control
        control.settimeout(READY_TIMEOUT_S)
        if control.recv(1) != b"r":
            raise OSError("the zygote did not start")
        self.attributes = proc_attributes(self.pid)

    def fork(self) -> tuple[int, int]:
        """(pid, socket fd) of a new child, which waits for ("load", program) on that socket."""
        assert self.control is not None
        self.control.sendall(b"f")
        data, ancillary, _, _ = self.control.recvmsg(_FD, _socket.CMSG_SPACE(_FD))
        if len(data) != _FD or not ancillary:
            raise OSError("the zygote did not fork")
        return int.from_bytes(data, "little"), int.from_bytes(ancillary[0][2][:_FD], "little")

    def stop(self) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.pid:
            try:
                os.kill(self.pid, _signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:  # already gone (and reaped by the guard)
                pass
            self.pid = 0
