"""Deletes directories a sandbox has discarded, off the critical path of its next run.

A recycle or restore swaps in new, empty directories (`layers.py`) and hands the old ones here, so its
own cost is a few system calls however much the program left behind. One daemon thread deletes what it
is handed: a small tree (a few entries, the common case) with a few unlinks of its own, anything larger
with `nice -n 19 rm -rf --one-file-system` in a separate process, so tens of thousands of files cost
neither the event loop's GIL nor a CPU at normal priority. Until deleted, the garbage stays on the
sandbox's own tmpfs (counted against its `disk_mb`), never on a host disk.
Guarantees: nothing is followed (`rm` and the small-tree path both unlink symlinks, never their targets);
a failed deletion is dropped (the tmpfs is unmounted with its sandbox anyway). Not here: choosing what
to discard.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from collections import deque
from pathlib import Path

SMALL_TREE = 64
"""Entries up to which a tree is deleted in this process; larger ones go to a niced `rm`."""


def _small_entries(path: str, budget: int) -> list[tuple[str, bool]] | None:
    """(path, is_dir) of everything under `path`, children before parents; None if over `budget`."""
    found: list[tuple[str, bool]] = []
    with os.scandir(path) as entries:
        for entry in entries:
            if len(found) >= budget:
                return None
            is_dir = stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
            if is_dir:
                below = _small_entries(entry.path, budget - len(found) - 1)
                if below is None:
                    return None
                found += below
            found.append((entry.path, is_dir))
    return found


def delete_tree(path: str) -> None:
    """Delete `path` and everything under it without following links (a niced `rm` for large trees)."""
    try:
        entries = _small_entries(path, SMALL_TREE)
    except FileNotFoundError:
        return
    if entries is not None:
        for name, is_dir in entries:
            (os.rmdir if is_dir else os.unlink)(name)
        os.rmdir(path)
        return
    rm, nice = shutil.which("rm") or "/bin/rm", shutil.which("nice")
    argv = [rm, "-rf", "--one-file-system", "--", path]
    if nice:
        argv = [nice, "-n", "19", *argv]
    pid = os.posix_spawn(argv[0], argv, {"PATH": "/usr/bin:/bin"})
    os.waitpid(pid, 0)


class Reaper:
    """A queue of discarded directories and the one daemon thread that deletes them."""

    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.cond = threading.Condition()
        self.busy = False
        self.current: str | None = None
        self.thread: threading.Thread | None = None
        self.deleted = 0

    def discard(self, path: Path | str) -> None:
        """Delete `path` soon, in the background; returns at once."""
        with self.cond:
            self.queue.append(str(path))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="sandbox-reaper", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def pending(self) -> int:
        """Directories handed over and not yet deleted (queued or being deleted)."""
        with self.cond:
            return len(self.queue) + self.busy

    def settle(self, timeout_s: float = 10.0) -> bool:
        """Wait until everything handed over so far is deleted; False on timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: not self.queue and not self.busy, timeout_s)

    def wait_for(self, paths: list[Path], timeout_s: float = 30.0) -> bool:
        """Wait until none of `paths` is queued or being deleted; False on timeout."""
        names = {str(p) for p in paths}

        def done() -> bool:
            return self.current not in names and names.isdisjoint(self.queue)

        with self.cond:
            return self.cond.wait_for(done, timeout_s)

    def _run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: bool(self.queue))
                path = self.queue.popleft()
                self.busy, self.current = True, path
            with contextlib.suppress(OSError):
                delete_tree(path)
            with self.cond:
                self.busy, self.current = False, None
                self.deleted += 1
                self.cond.notify_all()


REAPER = Reaper()
