"""Constant-time workspace snapshots and recycles: an overlay for `work/`, a fresh bind for `tmp/`.

The workspace directory is an overlay mount on the sandbox's own tmpfs: read-only lower layers (newest
first) plus one writable upper layer; `/tmp` is a bind of a directory of its own. Each generation of
the upper layer, the overlay's work directory and the `/tmp` directory is created new (`.s/u<N>`,
`.s/w<N>`, `.s/t<N>`), so a recycle or restore gives the program new directory inodes: their mode,
owner, extended attributes and times are a new sandbox's by construction, whatever the previous
program did to them. `snapshot` unmounts, renames the upper layer into a new lower layer, starts a new
upper and remounts; `restore` remounts over the snapshot's stack with a new upper and a new `/tmp`; a
fork mounts its own upper over the same stack. Each is a handful of mount system calls; the discarded
directories go to the reaper (`reaper.py`), which deletes them in the background, so the cost does not
grow with what the program left behind. The tmpfs is a shared mount, so a remount on the host
propagates into a running sandbox, whose bwrap bound the plain directories underneath (see
`Sandbox._open_sync`: the mounts here are made only after bwrap has set up its binds). Mount options
name layers as `/proc/self/fd/<fd>/...` relative to a descriptor of the workspace root, so the
sandbox's `/proc/self/mountinfo` shows no host path and no trainer pid.
Guarantees: layers are never written after they are promoted; a workspace whose layers back another
sandbox's fork is kept until that fork closes (`pins`). Not here: the tmpfs itself and file access
(`workspace.py`). Needs root; callers fall back to copies and explicit resets.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from posttrain.sandbox.reaper import REAPER

MS_NOSUID, MS_NODEV, MS_BIND, MS_SHARED, MNT_DETACH = 2, 4, 4096, 1 << 20, 2
FS_IOC_GETFLAGS = 0x80086601
_LIBC = ctypes.CDLL(None, use_errno=True)
_LAYER_IDS = itertools.count(1)
_GENERATIONS = itertools.count(1)


class LayerError(OSError):
    """An overlay mount or unmount failed."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno_value = ctypes.get_errno()
        raise LayerError(errno_value, f"{what}: {os.strerror(errno_value)}")


def make_shared(path: Path) -> None:
    _check(_LIBC.mount(None, str(path).encode(), None, MS_SHARED, None), f"make {path} shared")


@contextlib.contextmanager
def _fd_paths() -> Iterator[dict[Path, int]]:
    """O_PATH descriptors of workspace roots, opened for one mount call and closed after it."""
    fds: dict[Path, int] = {}
    try:
        yield fds
    finally:
        for fd in fds.values():
            os.close(fd)


def _neutral(path: Path, root: Path, fds: dict[Path, int]) -> str:
    """`path` (under workspace root `root`) as seen through a descriptor of `root`: no host path."""
    if root not in fds:
        fds[root] = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fds[root]}/{path.relative_to(root)}"


Signature = tuple[object, ...]


def signature(path: Path) -> Signature | None:
    """Everything a program can change about an empty directory, or None if it is not empty.

    Contents, every stat field (mode, owner, link count, size, all three times), the inode flags
    (`chattr`) and the xattr names (ACLs are xattrs). The directory is read before it is stat'ed, so
    an access-time update caused by this very read is part of the signature. Every change a program
    can make to a directory also moves its ctime, which it cannot set; the other fields catch a change
    made within the same timestamp tick.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with os.scandir(fd) as entries:
            if next(entries, None) is not None:
                return None
        info = os.fstat(fd)
        try:
            flags = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
        except OSError:
            flags = b""
        return (info.st_ino, info.st_dev, info.st_mode, info.st_uid, info.st_gid, info.st_nlink, info.st_size,
                info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns, flags, tuple(sorted(os.listxattr(fd))))  # fmt: skip
    finally:
        os.close(fd)


def _untouched(path: Path, recorded: Signature | None) -> bool:
    try:
        return recorded is not None and signature(path) == recorded
    except OSError:
        return False


def _layer_root(layer: str) -> Path:
    return Path(layer).parent.parent  # <workspace root>/.l/<n>


class Layers:
    def __init__(self, root: Path, merged: Path, tmp: Path, owner: int) -> None:
        self.root, self.merged, self.tmp, self.owner = root, merged, tmp, owner
        self.store = root / ".l"  # short: every layer path goes into one page of mount options
        self.scratch = root / ".s"
        base = self.store / "0"
        for path in (self.store, base, self.scratch):
            path.mkdir(mode=0o755)
        self.base: tuple[str, ...] = (str(base),)
        self.stack: tuple[str, ...] = self.base
        self.pins = 0
        self.promoted = 0
        self.mounted = self.tmp_mounted = False
        self.upper_signature: Signature | None = None
        self.tmp_signature: Signature | None = None
        """Signatures of the upper layer and `/tmp` directory as made, taken at their first mount."""
        self.discarded: list[Path] = []
        """What the last restore handed to the reaper (its deletion may still be running)."""
        self.upper, self.ovwork = self._new_upper()
        self.tmp_source = self._new_tmp()
        try:
            self.mount()
        except OSError:
            self.unmount()
            raise

    def _new_upper(self) -> tuple[Path, Path]:
        generation = next(_GENERATIONS)
        upper, ovwork = self.scratch / f"u{generation}", self.scratch / f"w{generation}"
        upper.mkdir(mode=0o700)
        ovwork.mkdir(mode=0o700)
        os.chown(upper, self.owner, self.owner)
        os.chmod(upper, 0o755)  # the workspace root the program sees; not left to the umask
        self.upper_signature = None
        return upper, ovwork

    def _new_tmp(self) -> Path:
        path = self.scratch / f"t{next(_GENERATIONS)}"
        path.mkdir(mode=0o700)
        os.chown(path, self.owner, self.owner)
        os.chmod(path, 0o1777)  # after the chown, and not through mkdir's umask
        self.tmp_signature = None
        return path

    def mount(self) -> None:
        """Mount whatever is not mounted: the overlay on `work/`, the current `/tmp` directory on `tmp/`."""
        if not self.mounted:
            with _fd_paths() as fds:
                lower = ":".join(_neutral(Path(p), _layer_root(p), fds) for p in self.stack)
                upper, ovwork = (_neutral(p, self.root, fds) for p in (self.upper, self.ovwork))
                options = f"lowerdir={lower},upperdir={upper},workdir={ovwork}".encode()
                rc = _LIBC.mount(
                    b"overlay", str(self.merged).encode(), b"overlay", MS_NOSUID | MS_NODEV, options
                )
            _check(rc, f"mount overlay on {self.merged}")
            self.mounted = True
            if self.upper_signature is None:  # a new upper: nothing has run on it yet
                self.upper_signature = signature(self.upper)
        if not self.tmp_mounted:
            rc = _LIBC.mount(str(self.tmp_source).encode(), str(self.tmp).encode(), None, MS_BIND, None)
            _check(rc, f"bind {self.tmp_source} on {self.tmp}")
            self.tmp_mounted = True
            if self.tmp_signature is None:
                self.tmp_signature = signature(self.tmp_source)

    def _unmount_overlay(self) -> None:
        if self.mounted:
            _check(_LIBC.umount2(str(self.merged).encode(), MNT_DETACH), f"umount {self.merged}")
            self.mounted = False

    def unmount(self) -> None:
        """Unmount both (a persistent sandbox's bwrap must bind the plain directories underneath)."""
        self._unmount_overlay()
        self._unmount_tmp()

    def _unmount_tmp(self) -> None:
        if self.tmp_mounted:
            _check(_LIBC.umount2(str(self.tmp).encode(), MNT_DETACH), f"umount {self.tmp}")
            self.tmp_mounted = False

    def snapshot(self) -> tuple[str, ...]:
        """Freeze the current state as a new lower layer; returns the layer stack that names it."""
        self._unmount_overlay()
        layer = self.store / str(next(_LAYER_IDS))
        os.rename(self.upper, layer)
        self.promoted += 1
        self.stack = (str(layer), *self.stack)
        REAPER.discard(self.ovwork)
        self.upper, self.ovwork = self._new_upper()
        self.mount()
        return self.stack

    def restore(self, stack: tuple[str, ...]) -> None:
        """Continue from `stack` (this or another sandbox's) with a new upper layer and a new `/tmp`.

        What was written since, and the old directories themselves, go to the reaper: O(1) here. A
        directory whose signature is still the one it had when it was made (nothing was written, and
        none of its metadata changed) is kept: it is in the state a new one would be.
        """
        keep_upper = stack == self.stack and self.mounted and _untouched(self.upper, self.upper_signature)
        keep_tmp = self.tmp_mounted and _untouched(self.tmp_source, self.tmp_signature)
        discarded: list[Path] = []
        if not keep_upper:
            self._unmount_overlay()
            discarded += [self.upper, self.ovwork]
            self.stack = stack
            self.upper, self.ovwork = self._new_upper()
        if not keep_tmp:
            self._unmount_tmp()
            discarded.append(self.tmp_source)
            self.tmp_source = self._new_tmp()
        self.mount()
        for path in discarded:
            REAPER.discard(path)
        self.discarded = discarded

    def clean(self) -> bool:
        """Nothing to reset: the empty base, both directories mounted and untouched since they were made."""
        return (
            self.pristine
            and self.mounted
            and self.tmp_mounted
            and _untouched(self.upper, self.upper_signature)
            and _untouched(self.tmp_source, self.tmp_signature)
        )

    @property
    def pristine(self) -> bool:
        """Never snapshotted or restored elsewhere: the overlay is just the upper over the empty base."""
        return self.promoted == 0 and self.stack == self.base

    def drop_snapshots(self) -> None:
        """Back to the empty base (for reuse): forget every promoted layer of this workspace."""
        self.restore(self.base)
        for entry in self.store.iterdir():
            if str(entry) not in self.base:
                REAPER.discard(entry)
                self.discarded.append(entry)
        self.promoted = 0
