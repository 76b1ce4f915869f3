"""LazyPool: one start shared by concurrent callers, a failed start retried, close then a fresh start."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from posttrain.sandbox.lazy import LazyPool


class _Pool:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_lazy_pool_starts_once_retries_failures_and_restarts_after_close() -> None:
    starts: list[Any] = []
    fail = [True]

    async def start() -> Any:
        await asyncio.sleep(0.01)
        if fail[0]:
            fail[0] = False
            raise RuntimeError("no sandbox")
        starts.append(_Pool())
        return starts[-1]

    async def scenario() -> None:
        lazy = LazyPool(start)
        assert not lazy.is_started
        with pytest.raises(RuntimeError):
            await lazy.get()
        first = await asyncio.gather(*(lazy.get() for _ in range(5)))
        assert len(starts) == 1 and all(p is starts[0] for p in first)
        await lazy.close()
        assert starts[0].closed and not lazy.is_started
        assert await lazy.get() is starts[1]

    asyncio.run(scenario())
