"""Incremental workspace snapshots: copy what changed, hard-link what did not.

Snapshots are immutable directories on the host. A `Tracker` remembers, per workspace file, the
identity it had (inode, size, mtime, ctime) when it was known to equal a snapshot file. Taking a
snapshot hard-links such unchanged files from the earlier snapshot and copies the rest; restoring keeps
workspace files that still equal the target snapshot's file and copies only the others. So the cost
grows with the bytes changed since the last snapshot or restore, not with the workspace size.

Why identities can be trusted: sandboxed code cannot set ctime (it is stamped by the kernel, and the
clock cannot be changed inside), so any write changes it, except a write within the same timestamp tick
as the recorded one. `safe_after_s` is the moment after which that cannot happen; the sandbox waits for
it before its next run (usually already past). Guarantees: only regular files, directories and symlinks
(as links) are copied; nothing is ever followed. Not here: where snapshots are stored.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import dataclass, field

TICK_S = 0.011
"""Longest file-timestamp granularity assumed (one jiffy at HZ=100, plus margin)."""

Key = tuple[int, int, int, int]


def _key(info: os.stat_result) -> Key:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass
class Tracker:
    synced: dict[str, tuple[Key, str]] = field(default_factory=dict)
    """Workspace-relative path -> (identity when it matched, the snapshot file it matched)."""
    safe_after_s: float = 0.0
    """time.time() after which a change to a tracked file is guaranteed to alter its identity."""

    def forget(self, rel: str) -> None:
        self.synced.pop(rel, None)

    def wait_until_safe(self) -> None:
        delay = self.safe_after_s - time.time()
        if delay > 0:
            time.sleep(delay)


def _walk(root: str, rel: str = "") -> list[tuple[str, os.stat_result]]:
    """(relative path, lstat) for everything under root, parents before children."""
    out: list[tuple[str, os.stat_result]] = []
    with os.scandir(os.path.join(root, rel) if rel else root) as entries:
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            info = entry.stat(follow_symlinks=False)
            out.append((child, info))
            if stat.S_ISDIR(info.st_mode):
                out += _walk(root, child)
    return out


def take(work: str, dest: str, tracker: Tracker) -> None:
    """Write a snapshot of `work` into the new directory `dest`."""
    os.mkdir(dest, 0o700)
    for rel, info in _walk(work):
        src, target = os.path.join(work, rel), os.path.join(dest, rel)
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(target, stat.S_IMODE(info.st_mode) | 0o700)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(src), target)
        elif stat.S_ISREG(info.st_mode):
            key = _key(info)
            known = tracker.synced.get(rel)
            if not (known and known[0] == key and _link(known[1], target)):
                copy_file(src, target, stat.S_IMODE(info.st_mode), info.st_size)
            tracker.synced[rel] = (key, target)
    tracker.safe_after_s = time.time() + TICK_S


def restore(work: str, src: str, tracker: Tracker, owner: int | None) -> None:
    """Make `work` equal to snapshot `src`, copying only files that differ."""
    wanted = dict(_walk(src))
    for rel, info in sorted(_walk(work), key=lambda item: item[0].count("/"), reverse=True):
        target = wanted.get(rel)
        if target is None or stat.S_IFMT(target.st_mode) != stat.S_IFMT(info.st_mode):
            _remove(os.path.join(work, rel), info)
            tracker.forget(rel)
    for rel, info in wanted.items():
        path, origin = os.path.join(work, rel), os.path.join(src, rel)
        if stat.S_ISDIR(info.st_mode):
            if not os.path.isdir(path) or os.path.islink(path):
                os.mkdir(path, stat.S_IMODE(info.st_mode) | 0o700)
                _chown(path, owner)
        elif stat.S_ISLNK(info.st_mode):
            if not os.path.islink(path) or os.readlink(path) != os.readlink(origin):
                if os.path.lexists(path):
                    _remove(path, os.lstat(path))
                os.symlink(os.readlink(origin), path)
                _chown(path, owner)
        elif stat.S_ISREG(info.st_mode):
            _restore_file(rel, path, origin, info, tracker, owner)
    tracker.safe_after_s = time.time() + TICK_S


def _restore_file(
    rel: str, path: str, origin: str, info: os.stat_result, tracker: Tracker, owner: int | None
) -> None:
    known = tracker.synced.get(rel)
    if known and os.path.lexists(path):
        current = os.lstat(path)
        if known[0] == _key(current) and _same_inode(known[1], info):
            return
    if os.path.lexists(path):
        os.unlink(path)
    copy_file(origin, path, stat.S_IMODE(info.st_mode), info.st_size)
    _chown(path, owner)
    tracker.synced[rel] = (_key(os.lstat(path)), origin)


def _same_inode(path: str, info: os.stat_result) -> bool:
    try:
        other = os.lstat(path)
    except OSError:
        return False
    return (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev)


def _link(existing: str, target: str) -> bool:
    try:
        os.link(existing, target, follow_symlinks=False)
        return True
    except OSError:
        return False


def _remove(path: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def _chown(path: str, owner: int | None) -> None:
    if owner is not None:
        os.chown(path, owner, owner, follow_symlinks=False)


def copy_file(src: str, dst: str, mode: int, size: int) -> None:
    """Copy a regular file without following links at either end."""
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            offset = 0
            while offset < size:
                copied = os.sendfile(fout, fin, offset, size - offset)
                if copied == 0:
                    break
                offset += copied
        finally:
            os.close(fout)
    finally:
        os.close(fin)
