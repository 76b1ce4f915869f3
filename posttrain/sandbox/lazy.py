"""`LazyPool`: a `SandboxPool` started on first use and shared by every caller until closed.

Verifiers that grade through the sandbox start their pool only when the first batch arrives (a domain
that is never graded starts nothing). Guarantees: concurrent first callers share one start; a start that
failed is retried at the next use; `close` waits for a start in flight and closes what it produced.
Not here: what the pool is started with (the owner's `start` coroutine function).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from posttrain.sandbox.pool import SandboxPool


class LazyPool:
    """One pool, started by `start` on the first `get`."""

    def __init__(self, start: Callable[[], Awaitable[SandboxPool]]) -> None:
        self._start = start
        self._starting: asyncio.Future[SandboxPool] | None = None

    @property
    def is_started(self) -> bool:
        """Whether a start was asked for (it may still be running, or have failed)."""
        return self._starting is not None

    async def get(self) -> SandboxPool:
        """The started pool, starting it (again, after a failure) when needed."""
        if self._starting is None or (self._starting.done() and self._starting.exception() is not None):
            self._starting = asyncio.ensure_future(self._start())
        return await asyncio.shield(self._starting)

    async def close(self) -> None:
        """Close the pool; the next `get` starts a new one."""
        starting, self._starting = self._starting, None
        try:
            pool = await starting if starting is not None else None
        except Exception:  # noqa: BLE001 - a pool that never started has nothing to close
            return
        if pool is not None:
            await pool.close()
