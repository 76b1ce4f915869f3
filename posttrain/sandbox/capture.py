"""Capturing a program's output and exit while enforcing its wall time and output limits (standard library only).

Shared by the host (one-shot and `local` runs, `launch.py`) and the in-sandbox supervisor, which runs
this file next to itself (`supervisor.py`). Guarantees: output is bounded by `max_output` per stream
(head + tail, with the total byte counts); a program that prints more than `output_limit` in total,
or outlives `timeout_s`, is stopped through the caller's `kill_all`; the program is reaped and its CPU
time and peak RSS reported. Not here: starting the program, namespaces, cgroups.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import Any


class OutputCapture:
    """Keeps the first and last `cap // 2` bytes of a stream and counts all of them."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def value(self) -> bytes:
        return bytes(self.head) + bytes(self.tail[-self.half :] if self.tail else b"")


class _Pump:
    """Moves bytes between the program's pipes and the captures until it exits or a limit trips."""

    def __init__(
        self, pid: int, stdin_fd: int | None, out_fd: int, err_fd: int, stdin_data: bytes, cap: int
    ) -> None:
        self.pid = pid
        self.caps = {out_fd: OutputCapture(cap), err_fd: OutputCapture(cap)}
        self.open_fds = set(self.caps)
        self.pidfd = _pidfd(pid)
        self.poller = select.poll()
        for fd in self.caps:
            os.set_blocking(fd, False)
            self.poller.register(fd, select.POLLIN)
        self.pending = memoryview(stdin_data)
        self.stdin_fd = stdin_fd
        if stdin_fd is not None:
            os.set_blocking(stdin_fd, False)
            if self.pending:
                self.poller.register(stdin_fd, select.POLLOUT)
            else:
                os.close(stdin_fd)
                self.stdin_fd = None
        if self.pidfd is not None:
            self.poller.register(self.pidfd, select.POLLIN)

    def run(self, deadline: float, output_limit: int) -> tuple[bool, bool]:
        """(timed_out, output_killed) once the program exited or a limit was hit."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True, False
            wait_ms = min(left, 0.02 if self.pidfd is None else left) * 1000
            exited = False
            for fd, _ev in self.poller.poll(max(wait_ms, 1)):
                if fd == self.pidfd:
                    exited = True
                elif fd == self.stdin_fd:
                    self.pending, self.stdin_fd = _feed_stdin(self.poller, fd, self.pending)
                elif fd in self.caps:
                    _drain(fd, self.caps[fd], self.poller, self.open_fds)
            if sum(c.total for c in self.caps.values()) > output_limit:
                return False, True
            if exited or (self.pidfd is None and _exited_nohang(self.pid)):
                return False, False

    def finish(self) -> None:
        """After the kill: collect what is left in the pipes, then close everything."""
        if self.stdin_fd is not None:
            self.poller.unregister(self.stdin_fd)
            os.close(self.stdin_fd)
            self.stdin_fd = None
        if self.pidfd is not None:
            self.poller.unregister(self.pidfd)  # stays readable; would turn the drain into a busy loop
        _drain_rest(self.caps, self.open_fds, self.poller, time.monotonic() + 2.0)
        if self.pidfd is not None:
            os.close(self.pidfd)
        for fd in self.caps:
            os.close(fd)


def collect(
    pid: int,
    stdin_fd: int | None,
    out_fd: int,
    err_fd: int,
    stdin_data: bytes,
    request: dict[str, Any],
    kill_all: Callable[[], None],
    reap_all: bool = False,
    status_fd: int | None = None,
) -> dict[str, Any]:
    """Feed stdin, capture output and wait for `pid` (this process must be its parent), then kill the rest.

    Where `pid` is an init that runs the program for us (the supervisor's per-run namespaces),
    `status_fd` carries the program's own wait status (or `!` and why the run could not start);
    `pid`'s own status stands where nothing came. Returns the reply dict; the kept output bytes are
    under `_out` and `_err`.
    """
    start = time.monotonic()
    pump = _Pump(pid, stdin_fd, out_fd, err_fd, stdin_data, int(request["max_output"]))
    timed_out, output_killed = pump.run(start + float(request["timeout_s"]), int(request["output_limit"]))
    kill_all()
    pump.finish()
    reply = _reap(pid, reap_all, status_fd)
    out, err = pump.caps[out_fd], pump.caps[err_fd]
    reply.update(
        timed_out=timed_out,
        output_killed=output_killed,
        wall_ms=(time.monotonic() - start) * 1000,
        stdout_total=out.total,
        stderr_total=err.total,
    )
    reply["_out"], reply["_err"] = out.value(), err.value()
    return reply


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited_nohang(pid: int) -> bool:
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _feed_stdin(poller: select.poll, fd: int, pending: memoryview) -> tuple[memoryview, int | None]:
    try:
        written = os.write(fd, pending[:65536])
        pending = pending[written:]
    except BlockingIOError:
        return pending, fd
    except OSError:
        pending = pending[:0]
    if not pending:
        poller.unregister(fd)
        os.close(fd)
        return pending, None
    return pending, fd


def _drain(fd: int, cap: OutputCapture, poller: select.poll, open_fds: set[int]) -> bool:
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return False
    if not chunk:
        poller.unregister(fd)
        open_fds.discard(fd)
        return False
    cap.feed(chunk)
    return True


def _drain_rest(
    caps: dict[int, OutputCapture], open_fds: set[int], poller: select.poll, until: float
) -> None:
    while open_fds and time.monotonic() < until:
        for fd, _ev in poller.poll(50):
            if fd in open_fds:
                _drain(fd, caps[fd], poller, open_fds)


def _reap(pid: int, reap_all: bool, status_fd: int | None = None) -> dict[str, Any]:
    """Wait for `pid` (and, as PID 1, for every other child); sum CPU, take the largest RSS."""
    _, status, usage = os.wait4(pid, 0)
    cpu_s = usage.ru_utime + usage.ru_stime
    maxrss_kb = usage.ru_maxrss
    while reap_all:
        try:
            _, _, other = os.wait4(-1, 0)
        except ChildProcessError:
            break
        cpu_s += other.ru_utime + other.ru_stime
        maxrss_kb = max(maxrss_kb, other.ru_maxrss)
    reply: dict[str, Any] = {"cpu_ms": cpu_s * 1000, "maxrss_kb": maxrss_kb}
    report = drain_closed_pipe(status_fd) if status_fd is not None else b""
    if report.startswith(b"!"):
        reply["error"] = "cannot start the run: " + report[1:].decode(errors="replace")
    elif len(report) == 4:
        status = int.from_bytes(report, "little", signed=True)
    reply["exit_code"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    reply["signal"] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    return reply


def drain_closed_pipe(fd: int) -> bytes:
    """Everything already written to a pipe whose writer has exited (it never blocks), then closed."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to a blocking descriptor."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
