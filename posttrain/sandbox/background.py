"""`run_blocking(coro, timeout_s)`: sandbox coroutines called from synchronous code.

Sandboxes are asyncio objects, while verifiers and environments are synchronous and called from worker
threads. One event loop runs in a daemon thread of this process; every sandbox created through
`run_blocking` lives on it, so its pipes and timers are served while the callers block.

Guarantees: the loop is started once, on first use, and shared by every caller; a coroutine that takes
longer than `timeout_s` raises `TimeoutError` in the caller (the coroutine itself is cancelled).
Not here: choosing limits (the sandbox spec), pooling (`SandboxPool`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's sandbox event loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="sandbox-loop", daemon=True).start()
        return _loop


def run_blocking(coro: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
    """Run `coro` on the background loop and wait for its result (never call from that loop itself)."""
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"sandbox call took longer than {timeout_s:g} s") from None
