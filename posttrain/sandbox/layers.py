"""Constant-time workspace snapshots with overlayfs layers on the sandbox's own tmpfs.

The workspace directory is an overlay mount: read-only lower layers (newest first) plus one writable
upper layer. `snapshot` unmounts, renames the upper layer into a new lower layer, starts an empty upper
and remounts; `restore` drops the upper layer and remounts over the snapshot's stack; a fork mounts its
own upper over the same stack. Each is a handful of mount syscalls plus, for restore, deleting what was
written since. The tmpfs is a shared mount, so a remount on the host propagates into a running
sandbox, whose bwrap bound the plain directory underneath (see `Session.start`: the overlay is mounted
only after bwrap has set up its binds). Guarantees: layers are never written after they are promoted;
a workspace whose layers back another sandbox's fork is kept until that fork closes (`pins`).
Not here: the tmpfs itself and file access (`workspace.py`). Needs root; callers fall back to copies.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_SHARED, MNT_DETACH = 2, 4, 1 << 20, 2
_LIBC = ctypes.CDLL(None, use_errno=True)
_LAYER_IDS = itertools.count(1)


class LayerError(OSError):
    """An overlay mount or unmount failed."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno_value = ctypes.get_errno()
        raise LayerError(errno_value, f"{what}: {os.strerror(errno_value)}")


def make_shared(path: Path) -> None:
    _check(_LIBC.mount(None, str(path).encode(), None, MS_SHARED, None), f"make {path} shared")


class Layers:
    def __init__(self, root: Path, merged: Path, owner: int) -> None:
        self.root, self.merged, self.owner = root, merged, owner
        self.upper, self.ovwork = root / ".upper", root / ".ovwork"
        self.store = root / ".l"  # short: every layer path goes into one page of mount options
        base = self.store / "0"
        for path in (self.store, base):
            path.mkdir(mode=0o755)
        self.base: tuple[str, ...] = (str(base),)
        self.stack: tuple[str, ...] = self.base
        self.pins = 0
        self.promoted = 0
        self.mounted = False
        self._fresh_upper()
        self.mount()

    def _fresh_upper(self) -> None:
        for path in (self.upper, self.ovwork):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(mode=0o755)
        os.chown(self.upper, self.owner, self.owner)

    def mount(self) -> None:
        if self.mounted:
            return
        options = f"lowerdir={':'.join(self.stack)},upperdir={self.upper},workdir={self.ovwork}"
        rc = _LIBC.mount(
            b"overlay", str(self.merged).encode(), b"overlay", MS_NOSUID | MS_NODEV, options.encode()
        )
        _check(rc, f"mount overlay on {self.merged}")
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            _check(_LIBC.umount2(str(self.merged).encode(), MNT_DETACH), f"umount {self.merged}")
            self.mounted = False

    def snapshot(self) -> tuple[str, ...]:
        """Freeze the current state as a new lower layer; returns the layer stack that names it."""
        self.unmount()
        layer = self.store / str(next(_LAYER_IDS))
        os.rename(self.upper, layer)
        self.promoted += 1
        self.stack = (str(layer), *self.stack)
        self._fresh_upper()
        self.mount()
        return self.stack

    def restore(self, stack: tuple[str, ...]) -> None:
        """Drop everything written since and continue from `stack` (this or another sandbox's)."""
        self.unmount()
        self.stack = stack
        self._fresh_upper()
        self.mount()

    @property
    def pristine(self) -> bool:
        """Never snapshotted or restored elsewhere: the overlay is just the upper over the empty base."""
        return self.promoted == 0 and self.stack == self.base

    def upper_is_small(self, max_entries: int = 32) -> bool:
        with os.scandir(self.upper) as entries:
            for count, entry in enumerate(entries):
                if count >= max_entries or entry.is_dir(follow_symlinks=False):
                    return False
        return True

    def drop_snapshots(self) -> None:
        """Back to the empty base (for reuse): forget every promoted layer of this workspace."""
        self.restore(self.base)
        for entry in self.store.iterdir():
            if str(entry) not in self.base:
                shutil.rmtree(entry, ignore_errors=True)
        self.promoted = 0
