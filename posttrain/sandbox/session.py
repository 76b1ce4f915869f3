"""A long-lived bubblewrap sandbox driven through its in-sandbox supervisor (see `supervisor.py`).

Starting costs one bwrap plus one Python start-up; after that each run is a fork+exec inside the
existing namespaces, which is what makes pooled runs cheap. Guarantees: a run that the supervisor cannot
answer within its timeout plus a grace period, or any protocol failure, is reported as an error (the
caller turns it into `sandbox_error`) and the session is marked dead; `close` always reaps bwrap.
Not here: cgroups and the workspace (owned by the `Sandbox`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import time
from pathlib import Path
from typing import Any

from posttrain.sandbox import capture, supervisor
from posttrain.sandbox.capture import write_all
from posttrain.sandbox.images import supervisor_python
from posttrain.sandbox.launch import (
    CAPTURE_MOUNT,
    INNER_WORKDIR,
    SANDBOX_PATH,
    SUPERVISOR_MOUNT,
    Context,
    Spawned,
    bwrap_argv,
    program_env,
    read_status,
    rlimits,
    spawn,
)

START_TIMEOUT_S = 15.0
REPLY_GRACE_S = 5.0
SMALL_FRAME = 60_000
READ_CHUNK = 1 << 16
"""First read of a reply: most replies fit, and a 1 MiB buffer costs an mmap and page faults."""


class SessionError(RuntimeError):
    """The supervisor could not be started or stopped answering."""


class Session:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.proc: Spawned | None = None
        self.alive = False

    def start(self) -> None:
        python, binds = supervisor_python()
        source = str(Path(supervisor.__file__).resolve())
        extra = (*binds, "--ro-bind", source, SUPERVISOR_MOUNT, "--ro-bind", str(Path(capture.__file__).resolve()),
                 CAPTURE_MOUNT)  # fmt: skip
        argv = bwrap_argv(
            self.ctx, [python, "-I", "-S", SUPERVISOR_MOUNT], persistent=True, extra_binds=extra
        )
        limits = [("RLIMIT_CORE", 0, 0)]
        self.proc = spawn(self.ctx, argv, limits, {"PATH": SANDBOX_PATH})
        os.close(self.proc.stderr)
        os.set_blocking(self.proc.stdout, False)
        self.alive = True
        try:
            hello = self._read_reply(time.monotonic() + START_TIMEOUT_S)
        except SessionError as exc:
            self.close()
            raise SessionError(f"sandbox supervisor did not start: {exc}") from None
        if not hello.get("ready"):
            self.close()
            raise SessionError(f"unexpected supervisor greeting {hello}")

    def run(
        self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str] | None
    ) -> dict[str, Any]:
        if not self.alive or self.proc is None:
            return {"error": "sandbox session is not running"}
        try:
            write_all(self.proc.stdin, self._request(argv, stdin, timeout_s, env))
            return self._read_reply(time.monotonic() + timeout_s + REPLY_GRACE_S)
        except (OSError, SessionError) as exc:
            self.alive = False
            return {"error": f"sandbox supervisor failed: {exc}"}

    def _request(self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str] | None) -> bytes:
        request = {
            "argv": argv, "env": program_env(self.ctx, env), "cwd": INNER_WORKDIR, "timeout_s": timeout_s,
            "rlimits": rlimits(self.ctx.spec), "max_output": self.ctx.spec.max_output_bytes,
            "output_limit": self.ctx.spec.output_limit_mb << 20, "stdin_len": len(stdin),
            "dev_mb": self.ctx.spec.memory_mb,
        }  # fmt: skip
        header = json.dumps(request).encode()
        return supervisor.HEADER.pack(len(header)) + header + stdin

    async def run_async(
        self, argv: list[str], stdin: bytes, timeout_s: float, env: dict[str, str] | None
    ) -> dict[str, Any]:
        """Like `run`, but waits for the reply on the event loop (no thread hop per run)."""
        if not self.alive or self.proc is None:
            return {"error": "sandbox session is not running"}
        loop = asyncio.get_running_loop()
        frame = self._request(argv, stdin, timeout_s, env)
        fd = self.proc.stdout
        reader = _ReplyReader(loop.create_future())
        loop.add_reader(fd, reader.on_readable, fd)
        try:
            if len(frame) <= SMALL_FRAME:
                write_all(self.proc.stdin, frame)  # fits in the pipe buffer: never blocks
            else:
                await loop.run_in_executor(None, write_all, self.proc.stdin, frame)
            return await asyncio.wait_for(reader.done, timeout_s + REPLY_GRACE_S)
        except (TimeoutError, OSError, SessionError) as exc:
            self.alive = False
            return {"error": f"sandbox supervisor failed: {type(exc).__name__} {exc}"}
        except asyncio.CancelledError:
            self.alive = False  # a reply may still arrive; the stream can no longer be trusted
            raise
        finally:
            loop.remove_reader(fd)

    def refresh(self) -> None:
        """Tell the supervisor the workspace mounts changed (reset, restore, snapshot): its prepared run
        lives in a mount namespace copied before, so it makes a new one. Nothing is answered."""
        if not self.alive or self.proc is None:
            return
        header = json.dumps({"op": "refresh"}).encode()
        try:
            write_all(self.proc.stdin, supervisor.HEADER.pack(len(header)) + header)  # a few bytes: never blocks
        except OSError:
            self.alive = False

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        assert self.proc is not None
        fd = self.proc.stdout
        size = supervisor.HEADER.unpack(_read_exact(fd, supervisor.HEADER.size, deadline))[0]
        reply: dict[str, Any] = json.loads(_read_exact(fd, size, deadline))
        reply["_out"] = _read_exact(fd, int(reply.get("stdout_len", 0)), deadline)
        reply["_err"] = _read_exact(fd, int(reply.get("stderr_len", 0)), deadline)
        return reply

    def close(self) -> None:
        proc, self.proc = self.proc, None
        self.alive = False
        if proc is None:
            return
        os.close(proc.stdin)
        try:
            _wait_exit(proc.pid, 2.0)
        finally:
            os.close(proc.stdout)
            read_status(proc.status)


class _ReplyReader:
    """Accumulates bytes from the supervisor until one whole reply frame has arrived."""

    def __init__(self, done: asyncio.Future[dict[str, Any]]) -> None:
        self.done = done
        self.buffer = bytearray()
        self.header: dict[str, Any] | None = None
        self.body_start = 0

    def on_readable(self, fd: int) -> None:
        if self.done.done():
            return
        try:
            chunk = os.read(fd, READ_CHUNK if self.header is None else 1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            self.done.set_exception(SessionError(f"reading from the supervisor: {exc}"))
            return
        if not chunk:
            self.done.set_exception(SessionError("supervisor exited"))
            return
        self.buffer += chunk
        self._parse()

    def _parse(self) -> None:
        size = supervisor.HEADER.size
        if self.header is None:
            if len(self.buffer) < size:
                return
            length = supervisor.HEADER.unpack(self.buffer[:size])[0]
            if len(self.buffer) < size + length:
                return
            self.header = json.loads(bytes(self.buffer[size : size + length]))
            self.body_start = size + length
        out_len, err_len = int(self.header.get("stdout_len", 0)), int(self.header.get("stderr_len", 0))
        end = self.body_start + out_len + err_len
        if len(self.buffer) < end:
            return
        reply = self.header
        reply["_out"] = bytes(self.buffer[self.body_start : self.body_start + out_len])
        reply["_err"] = bytes(self.buffer[self.body_start + out_len : end])
        self.done.set_result(reply)


def _read_exact(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SessionError("timed out waiting for the supervisor")
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(left * 1000):
            continue
        try:
            chunk = os.read(fd, min(size, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise SessionError("supervisor exited")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _wait_exit(pid: int, timeout_s: float) -> None:
    """Reap `pid`, SIGKILLing its process group if it has not exited within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.002)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
