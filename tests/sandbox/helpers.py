"""Shared helpers for the sandbox tests: run code in a fresh sandbox from synchronous tests."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from posttrain.sandbox import ExecResult, Sandbox, SandboxSpec
from posttrain.sandbox.host import host_features

T = TypeVar("T")

requires_bwrap = pytest.mark.skipif(not host_features().bwrap_usable, reason="bubblewrap is not usable here")
requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (host-side mounts, uids, netns)")
PY = "python3"


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def spec(**fields: Any) -> SandboxSpec:
    base: dict[str, Any] = {"timeout_s": 10.0, "memory_mb": 256, "pids": 64, "disk_mb": 32}
    base.update(fields)
    return SandboxSpec(**base)


async def in_sandbox(argv: list[str], stdin: bytes = b"", **fields: Any) -> ExecResult:
    async with Sandbox.create(spec(**fields)) as sb:
        return await sb.exec(argv, stdin)


def py(code: str, stdin: bytes = b"", **fields: Any) -> ExecResult:
    """Run Python source in a fresh persistent sandbox."""
    return run(in_sandbox([PY, "-c", code], stdin, **fields))


def sh(script: str, **fields: Any) -> ExecResult:
    return run(in_sandbox(["/bin/sh", "-c", script], **fields))


async def with_ticker(work: Callable[[], Awaitable[T]], period_s: float = 0.01) -> tuple[T, int]:
    """Run `work` while a host-side timer ticks every `period_s`; returns (result, ticks)."""
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(period_s)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        result = await work()
    finally:
        done.set()
        await task
    return result, ticks


def host_python() -> str:
    return os.path.realpath(sys.executable)


def run_leftovers(before: list[int], after: list[int], settle_s: float = 2.0) -> list[int]:
    """Pids in `after` but not `before`, except the supervisor's prepared child (a fork of the
    supervisor, or the shell it execs to wait for the next run).

    A process in the middle of execve shows an empty cmdline (its new memory has no arguments yet),
    and the prepared child is forked and execs a few ms after each reply: an empty cmdline is read
    again until it shows a program or the process is gone, for up to `settle_s`.
    """
    from posttrain.sandbox.launch import SUPERVISOR_MOUNT
    from posttrain.sandbox.supervisor import WAITER_ARGV

    waiter = "\0".join(WAITER_ARGV).encode() + b"\0"
    deadline = time.monotonic() + settle_s
    left: list[int] = []
    pending = sorted(set(after) - set(before))
    while True:
        unsettled = []
        for pid in pending:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    cmdline = handle.read()
            except OSError:
                continue  # already gone
            if not cmdline:
                unsettled.append(pid)
            elif SUPERVISOR_MOUNT.encode() not in cmdline and cmdline != waiter:
                left.append(pid)
        if not unsettled or time.monotonic() >= deadline:
            return sorted(left + unsettled)
        pending = unsettled
        time.sleep(0.01)


def proc_state(pid: int) -> str:
    """The state letter of `pid` from /proc ("Z" for a zombie), or "gone"."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
