"""The host side of a sandbox's writable state: a size-capped tmpfs holding `work/` and `tmp/`.

As root each sandbox gets its own tmpfs mount (size = `disk_mb`), so a full workspace fails with ENOSPC
inside the sandbox and never fills a host disk; elsewhere a plain directory is used and only
RLIMIT_FSIZE bounds single files. Guarantees: host-side reads and writes never follow a symlink or open
a FIFO placed by sandboxed code (every path component is opened with O_NOFOLLOW, and only regular files
are read); snapshots copy regular files, directories and symlinks (as links), nothing else.
Not here: running anything in the sandbox.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from posttrain.sandbox import snapshots
from posttrain.sandbox.layers import Layers, make_shared
from posttrain.sandbox.reaper import REAPER

MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
_COUNTER = itertools.count()
_LIBC = ctypes.CDLL(None, use_errno=True)


class WorkspaceError(OSError):
    """A workspace path is unsafe or cannot be accessed."""


def _tmpfs_mounts() -> set[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split()[:1] == ["tmpfs"]:
            found.add(left.split()[4])
    return found


@functools.cache
def state_base() -> Path:
    """Where sandbox state (workspace mounts, snapshots) lives: a memory-backed directory when possible.

    Snapshots are copies, so they must be on tmpfs to be cheap; /run is not tmpfs on every host.
    """
    suffix = "posttrain-sandbox" if os.geteuid() == 0 else f"posttrain-sandbox-{os.geteuid()}"
    tmpfs = _tmpfs_mounts()
    for candidate in ("/run", "/dev/shm", tempfile.gettempdir()):
        if candidate in tmpfs and os.access(candidate, os.W_OK):
            return Path(candidate) / suffix
    return Path(tempfile.gettempdir()) / suffix


def _mount_tmpfs(target: Path, size_mb: int, uid: int) -> bool:
    """A size-capped tmpfs owned by `uid`; the owner is set by chown, not a mount option, so that the
    sandbox's mountinfo (which shows the options) does not name the host uid."""
    options = f"size={size_mb}m,mode=0755".encode()
    if _LIBC.mount(b"tmpfs", str(target).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return False
    os.chown(target, uid, uid)
    return True


_SWEPT: set[Path] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(base: Path) -> int:
    """Unmount and remove state left by processes that died without closing their sandboxes."""
    removed = 0
    for parent in (base, base / "snapshots"):
        if not parent.is_dir():
            continue
        for entry in parent.iterdir():
            owner = entry.name.split("-", 1)[0]
            if not owner.isdigit() or _pid_alive(int(owner)):
                continue
            _LIBC.umount2(str(entry).encode(), MNT_DETACH)
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


@dataclass
class Workspace:
    root: Path
    owner_uid: int
    mounted: bool
    size_mb: int = 0
    tracker: snapshots.Tracker = field(default_factory=snapshots.Tracker)
    layers: Layers | None = None
    """Overlay layers when available (root + tmpfs): snapshots then cost O(1), not a copy."""
    parents: list[Workspace] = field(default_factory=list)
    """Workspaces whose layers our overlay has stacked on (forks, foreign restores); pinned until we close."""
    closing: bool = False
    on_close: Callable[[], None] | None = None
    """Called once the workspace is removed (gives back the host uid its files are owned by)."""

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @classmethod
    def create(cls, size_mb: int, owner_uid: int, base: Path | None = None) -> Workspace:
        base = base or state_base()
        base.mkdir(parents=True, exist_ok=True, mode=0o711)
        if base not in _SWEPT:
            _SWEPT.add(base)
            sweep_stale(base)
        root = base / f"{os.getpid()}-{next(_COUNTER)}"
        root.mkdir(mode=0o755)
        mounted = os.geteuid() == 0 and _mount_tmpfs(root, size_mb, owner_uid)
        space = cls(root, owner_uid, mounted, size_mb)
        try:
            for path, mode in ((space.work, 0o755), (space.tmp, 0o1777)):
                path.mkdir()
                space._own(path)
                os.chmod(path, mode)  # after the chown (which may clear set-id bits), not via the umask
            if mounted:
                space.layers = _try_layers(space)
        except BaseException:  # a half-built workspace must not leave its tmpfs mounted
            space.close()
            raise
        return space

    def _own(self, path: Path | str, fd: int | None = None) -> None:
        if os.geteuid() != 0:
            return
        if fd is not None:
            os.fchown(fd, self.owner_uid, self.owner_uid)
        else:
            os.chown(path, self.owner_uid, self.owner_uid, follow_symlinks=False)

    def write_file(self, rel: str, data: bytes, mode: int = 0o644) -> None:
        self.tracker.forget("/".join(p for p in rel.split("/") if p not in ("", ".")))
        owner = self.owner_uid if os.geteuid() == 0 else None
        parent_fd, name = _open_parent(self.work, rel, create=True, owner=owner)
        try:
            try:
                os.unlink(name, dir_fd=parent_fd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                raise WorkspaceError(errno.EISDIR, f"{rel} is a directory") from None
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=parent_fd)
            try:
                os.fchmod(fd, mode)
                self._own(name, fd=fd)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        finally:
            os.close(parent_fd)

    def read_file(self, rel: str, max_bytes: int = 64 << 20) -> bytes:
        parent_fd, name = _open_parent(self.work, rel, create=False)
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise WorkspaceError(errno.ELOOP, f"{rel} is a symlink; not followed") from None
                raise
        finally:
            os.close(parent_fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise WorkspaceError(errno.EINVAL, f"{rel} is not a regular file")
            if info.st_size > max_bytes:
                raise WorkspaceError(errno.EFBIG, f"{rel} is larger than {max_bytes} bytes")
            chunks: list[bytes] = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def reset(self) -> None:
        """Make `work/` and `tmp/` what a new workspace has: contents and the directories' own metadata.

        With layers: new directories are mounted (O(1)) and the old ones deleted in the background.
        Without (no mounts allowed): emptied and their mode, owner, xattrs and times reset in place,
        since a running sandbox bound these very inodes.
        """
        self.tracker.synced.clear()
        if self.layers is None:
            for path, mode in ((self.work, 0o755), (self.tmp, 0o1777)):
                os.chmod(path, 0o700)  # a mode the program set must not lock the owner out
                _clear(path)
                self._reset_dir(path, mode)
        elif self.layers.pins or self.layers.pristine:
            self.layers.restore(self.layers.base)
        else:
            self.layers.drop_snapshots()

    def wait_for_garbage(self, timeout_s: float = 30.0) -> None:
        """If what the last reset or restore discarded still fills more than 1/16 of the tmpfs, wait for
        the reaper to delete it: until then it counts against this sandbox's `disk_mb` and memory
        limit, and the next run must start with the whole of both. Small leftovers (the usual case)
        are not waited for; a slot that does wait is simply out of its pool's rotation meanwhile."""
        if self.layers is None or not self.layers.discarded or not self.mounted:
            return
        st = os.statvfs(self.root)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        if used * 16 > st.f_blocks * st.f_frsize:
            REAPER.wait_for(self.layers.discarded, timeout_s)

    def reset_if_small(self, max_entries: int = 32) -> bool:
        """Reset here and now (on the caller's thread) when that takes a few cheap system calls; False
        if it needs `reset` on a worker thread.

        With layers that is only when there is nothing to do (`Layers.clean`): mounts are not cheap
        enough for an event loop (an unmount waits for an RCU grace period and tears down the
        overlay), and in a worker thread that kernel time overlaps other sandboxes' work.
        """
        if self.layers is not None:
            if not self.layers.clean():
                return False
            self.tracker.synced.clear()
            return True
        if not (_few_files(self.work, max_entries) and _few_files(self.tmp, max_entries)):
            return False
        self.reset()
        return True

    def _reset_dir(self, path: Path, mode: int) -> None:
        """Give a directory kept in place a new one's metadata: mode, owner, no xattrs, current times."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for name in os.listxattr(fd):
                os.removexattr(fd, name)
            self._own(path, fd=fd)
            os.fchmod(fd, mode)
            os.utime(fd)
        finally:
            os.close(fd)

    def is_fresh(self) -> bool:
        """Whether `work/` and `tmp/` look like a new workspace's (empty, default mode and owner, no xattrs).

        A cheap check (a few system calls) before a recycled workspace is handed to another sandbox.
        """
        owner = (self.owner_uid, self.owner_uid) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
        for path, mode in ((self.work, 0o755), (self.tmp, 0o1777)):
            try:
                info = os.lstat(path)
                if (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) != (mode, *owner):
                    return False
                if not stat.S_ISDIR(info.st_mode) or os.listxattr(path, follow_symlinks=False):
                    return False
                with os.scandir(path) as entries:
                    if next(entries, None) is not None:
                        return False
            except OSError:
                return False
        return True

    def snapshot_to(self, dest: Path) -> None:
        snapshots.take(str(self.work), str(dest), self.tracker)

    def restore_from(self, src: Path) -> None:
        for path in (self.work, self.tmp):
            os.chmod(path, 0o700)  # a mode the program set must not lock the owner out
        _clear(self.tmp)
        self._reset_dir(self.tmp, 0o1777)
        snapshots.restore(
            str(self.work), str(src), self.tracker, self.owner_uid if os.geteuid() == 0 else None
        )
        self._reset_dir(self.work, 0o755)

    def restore_snapshot(self, path: Path, stack: tuple[str, ...] | None, source: Workspace | None) -> None:
        """Continue from a snapshot: remount over its layers, or copy it back when there are none."""
        if stack is None:
            self.restore_from(path)
            return
        if self.layers is None or source is None:
            raise WorkspaceError(errno.EINVAL, "a layered snapshot needs a layered workspace")
        if source is not self and source not in self.parents:
            source.pin()
            self.parents.append(source)
        self.layers.restore(stack)

    def pin(self) -> None:
        assert self.layers is not None
        self.layers.pins += 1

    def unpin(self) -> None:
        assert self.layers is not None
        self.layers.pins -= 1
        if self.closing and self.layers.pins == 0:
            self.close()

    def close(self) -> None:
        if self.layers is not None and self.layers.pins > 0:
            self.closing = True  # a fork still stacks on our layers; the last one to close finishes this
            return
        if self.mounted:
            if _LIBC.umount2(str(self.root).encode(), MNT_DETACH) != 0:
                raise OSError(ctypes.get_errno(), f"umount {self.root}")
            self.mounted = False
        shutil.rmtree(self.root, ignore_errors=True)
        parents, self.parents = self.parents, []
        for parent in parents:
            parent.unpin()
        release, self.on_close = self.on_close, None
        if release is not None:
            release()


def _try_layers(space: Workspace) -> Layers | None:
    """Overlay layers and a bound `/tmp` on the workspace's tmpfs, or None where overlayfs is missing."""
    try:
        make_shared(space.root)
        return Layers(space.root, space.work, space.tmp, space.owner_uid)
    except OSError:
        return None  # no overlayfs here: snapshots fall back to copies, recycles to explicit resets


def _open_parent(base: Path, rel: str, create: bool, owner: int | None = None) -> tuple[int, str]:
    """Open the directory holding `rel` under `base` without following symlinks; (dir fd, last name)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or rel.startswith("/"):
        raise WorkspaceError(errno.EINVAL, f"path {rel!r} must be relative and stay in the workspace")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(base, flags)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    if owner is not None:
                        os.chown(part, owner, owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspaceError(exc.errno, f"{rel}: {part} is not a real directory") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _few_files(path: Path, max_entries: int) -> bool:
    with os.scandir(path) as entries:
        for count, entry in enumerate(entries):
            if count >= max_entries or entry.is_dir(follow_symlinks=False):
                return False
    return True


def _clear(path: Path) -> None:
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
                if os.path.lexists(entry.path):
                    _make_writable(Path(entry.path))
                    shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _make_writable(path: Path) -> None:
    """Let the owner delete a tree whose directories the program made unreadable (mode 000)."""
    os.chmod(path, 0o700)  # before the walk: a directory that cannot be listed would be skipped
    for dirpath, dirnames, _ in os.walk(path):  # top-down: subdirectories are fixed before entered
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                os.chmod(full, 0o700)
