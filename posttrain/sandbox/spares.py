"""Emptied workspaces and cgroups kept for the next sandbox, with a one-shot launcher parked in each.

Reusing a spare skips mount/umount and mkdir/rmdir; its parked launcher (`parked.py`) takes the cgroup
join, rlimits and uid drop off the next one-shot run's critical path. Guarantees: a spare is offered only
after its cgroup was confirmed empty and its workspace reset (new `work/` and `tmp/` directories, see
`layers.py`), and `take` checks once more that both look new (empty, default mode and owner, no
xattrs), so a new sandbox never sees anything of an old one, whatever spec that one ran with. A spare
is matched on everything that shaped it and is not set again by the taker: the tmpfs size (`disk_mb`),
its owner (the sandbox uid) and whether it has a cgroup; the cgroup's limits are rewritten by the taker
and a parked launcher is used only for a run of exactly its shape. A launcher is parked only after the
reset, so the emptiness check can never kill it; spares are removed at exit, and then this process's
cgroup directories (or by the stale sweep of the next process). `give(..., background=True)` does the
recycle on a worker thread so a one-shot run returns first; `take` waits briefly for such recycles and
`settle` waits for all of them. Not here: what a sandbox does with its spare.
"""

from __future__ import annotations

import atexit
import threading
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass

from posttrain.sandbox.cgroups import CgroupGroup, cleanup_all
from posttrain.sandbox.launch import Context, ParkedLauncher
from posttrain.sandbox.parked import park
from posttrain.sandbox.snapshots import Tracker
from posttrain.sandbox.workspace import Workspace

TAKE_WAIT_S = 1.0
"""How long `take` waits for recycles in flight before it makes a new workspace and cgroup instead."""


@dataclass
class Spare:
    workspace: Workspace
    cgroup: CgroupGroup | None
    parked: ParkedLauncher | None = None

    def drop_launcher(self) -> None:
        if self.parked is not None:
            self.parked.discard()
            self.parked = None

    def discard(self) -> None:
        """Remove everything: launcher, cgroup (killing anything left) and workspace."""
        try:
            self.drop_launcher()
            if self.cgroup is not None:
                self.cgroup.close()
        finally:
            self.workspace.close()


class Spares:
    MAX = 8

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.items: list[Spare] = []
        self.pending: set[Future[None]] = set()
        self.lock = threading.Lock()
        atexit.register(self._drain_at_exit)

    def take(self, size_mb: int, owners: range, want_cgroup: bool) -> Spare | None:
        """A spare of this size, its workspace owned by one of `owners` (each sandbox has its own uid) and
        looking new, or None (a stale one is discarded)."""
        self.settle(TAKE_WAIT_S)
        while (spare := self._pop(size_mb, owners, want_cgroup)) is not None:
            if spare.workspace.is_fresh():
                return spare
            spare.discard()  # never happens unless a reset missed something: belt and braces
        return None

    def _pop(self, size_mb: int, owners: range, want_cgroup: bool) -> Spare | None:
        with self.lock:
            for index, spare in enumerate(self.items):
                space = spare.workspace
                if (
                    space.size_mb == size_mb
                    and space.owner_uid in owners
                    and (spare.cgroup is not None) == want_cgroup
                ):
                    return self.items.pop(index)
        return None

    def give(self, ctx: Context, background: bool = False) -> None:
        """Recycle a closed sandbox's workspace and cgroup (parking a launcher if it ran one-shot)."""
        spare = Spare(ctx.workspace, ctx.cgroup, ctx.parked)
        ctx.parked = None
        if background:
            try:
                future = self.executor.submit(self._recycle, spare, ctx)
            except RuntimeError:  # the executor is shutting down (interpreter exit)
                self._recycle(spare, ctx)
                return
            with self.lock:
                self.pending.add(future)
            future.add_done_callback(self._forget)
        else:
            self._recycle(spare, ctx)

    def _forget(self, future: Future[None]) -> None:
        with self.lock:
            self.pending.discard(future)

    def _recycle(self, spare: Spare, ctx: Context) -> None:
        space = spare.workspace
        try:
            spare.drop_launcher()  # an unused one may hold a stale view of the context
            if space.parents or (space.layers is not None and space.layers.pins):
                raise OSError("shares layers with other sandboxes: not reusable")
            if spare.cgroup is not None:
                spare.cgroup.kill_all()  # stragglers were signalled when the run ended; confirm empty
            space.reset()
            space.tracker = Tracker()
            if ctx.ran_oneshot:
                spare.parked = park(ctx)
        except Exception:  # noqa: BLE001 - a spare that cannot be recycled is removed, never offered
            spare.discard()
            return
        with self.lock:
            if len(self.items) < self.MAX:
                self.items.append(spare)
                return
        spare.discard()

    def settle(self, timeout_s: float = 5.0) -> None:
        """Wait for background recycles (benchmarks call this so no background work overlaps a timing)."""
        with self.lock:
            pending = list(self.pending)
        if pending:
            wait(pending, timeout=timeout_s)

    def drain(self) -> None:
        """Discard every spare; at exit (registered first, so run last) also this process's cgroups."""
        self.settle()
        with self.lock:
            items, self.items = self.items, []
        for spare in items:
            spare.discard()

    def _drain_at_exit(self) -> None:
        try:
            self.drain()
        finally:
            cleanup_all()  # the managers' own exit hooks ran before ours, while spares still held groups
