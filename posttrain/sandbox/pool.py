"""`SandboxPool`: warm sandboxes shared by many concurrent callers on one event loop.

`run` = acquire (wait in FIFO order while all are busy) -> place files -> exec -> recycle (the supervisor
has already killed every process of the run; the workspace is emptied and the spec's files re-placed)
-> release. Guarantees: no call is dropped (callers wait, so saturation is backpressure, not failure); at
most `size` programs run at once; a sandbox whose supervisor died or whose recycle failed is closed and
replaced, and the call that hit it returns `sandbox_error`; `close` waits for recycles and removes every
sandbox. Not here: retries (a scheduler retries `sandbox_error` results).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from posttrain.sandbox.sandbox import Sandbox
from posttrain.sandbox.spec import ExecResult, SandboxSpec, sandbox_error

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    runs: int = 0
    infra_errors: int = 0
    replaced: int = 0
    waiting: int = 0


class SandboxPool:
    def __init__(self, spec: SandboxSpec | None = None, size: int = 4, *, persistent: bool = True) -> None:
        if size < 1:
            raise ValueError("pool size must be at least 1")
        self.spec = spec or SandboxSpec()
        self.size = size
        self.persistent = persistent
        self.stats = PoolStats()
        self._idle: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._all: set[Sandbox] = set()
        self._recycling: set[asyncio.Task[None]] = set()
        self._closed = False

    async def start(self) -> SandboxPool:
        sandboxes = await asyncio.gather(*(self._new() for _ in range(self.size)), return_exceptions=True)
        errors = [s for s in sandboxes if isinstance(s, BaseException)]
        for sandbox in sandboxes:
            if isinstance(sandbox, Sandbox):
                self._idle.put_nowait(sandbox)
        if errors:
            await self.close()
            raise errors[0]
        return self

    async def _new(self) -> Sandbox:
        sandbox = await Sandbox.create(self.spec, persistent=self.persistent)
        self._all.add(sandbox)
        return sandbox

    async def borrow(self) -> Sandbox:
        """Take an idle sandbox, waiting in FIFO order while all are busy; pair with `release`."""
        if self._closed:
            raise RuntimeError("pool is closed")
        self.stats.waiting += 1
        try:
            return await self._idle.get()
        finally:
            self.stats.waiting -= 1

    def release(self, sandbox: Sandbox) -> None:
        """Give a borrowed sandbox back; it is recycled (or replaced) in the background."""
        task = asyncio.get_running_loop().create_task(self._recycle(sandbox))
        self._recycling.add(task)
        task.add_done_callback(self._recycling.discard)

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Sandbox]:
        """`async with pool.acquire() as sb:` borrows a sandbox and releases it when the block exits."""
        sandbox = await self.borrow()
        try:
            yield sandbox
        finally:
            self.release(sandbox)

    async def run(
        self,
        argv: Sequence[str],
        files: dict[str, bytes | str] | None = None,
        stdin: bytes = b"",
        *,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run one program in a clean pooled sandbox with `files` placed in its workspace."""
        async with self.acquire() as sandbox:
            try:
                for name, content in (files or {}).items():
                    await sandbox.write_file(name, content)
            except (OSError, ValueError) as exc:
                result = sandbox_error(f"cannot place files: {exc}")
            else:
                result = await sandbox.exec(argv, stdin, timeout_s=timeout_s, env=env)
            self.stats.runs += 1
            self.stats.infra_errors += result.status == "sandbox_error"
            return result

    async def _recycle(self, sandbox: Sandbox) -> None:
        if not sandbox.broken and not self._closed:
            try:
                await sandbox.reset()
                self._idle.put_nowait(sandbox)
                return
            except Exception:  # noqa: BLE001 - a sandbox that cannot be reset is replaced
                log.exception("sandbox recycle failed; replacing it")
        await self._replace(sandbox)

    async def _replace(self, sandbox: Sandbox) -> None:
        self._all.discard(sandbox)
        await sandbox.close()
        if self._closed:
            return
        self.stats.replaced += 1
        for attempt in range(3):
            try:
                self._idle.put_nowait(await self._new())
                return
            except Exception:  # noqa: BLE001
                log.exception("cannot start a replacement sandbox (attempt %d)", attempt + 1)
                await asyncio.sleep(0.1 * (attempt + 1))

    async def close(self) -> None:
        self._closed = True
        while self._recycling:
            await asyncio.gather(*list(self._recycling), return_exceptions=True)
        sandboxes, self._all = list(self._all), set()
        await asyncio.gather(*(s.close() for s in sandboxes), return_exceptions=True)

    async def __aenter__(self) -> SandboxPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
