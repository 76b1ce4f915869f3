"""Adversarial programs against the writable directories: nothing a run does to `/workspace` or `/tmp`
(their contents or the directories' own mode, xattrs, ACLs and times) reaches a later run, through a
pool's recycle, a spare reused by `run_sync` with another spec, or a restore; recycling costs the same
however many files were left; a clean exit leaves no cgroup directory; mountinfo names no host path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from posttrain.sandbox import Sandbox, SandboxPool, run_sync
from posttrain.sandbox.workspace import Workspace, state_base

from .helpers import PY, requires_bwrap, requires_root, run, spec

PROBE = """
import fcntl, json, os
seen = {}
for path in ("/workspace", "/tmp"):
    info = os.lstat(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        flags = fcntl.ioctl(fd, 0x80086601, bytes(8)).hex()
        os.close(fd)
    except OSError as exc:
        flags = f"error {exc.errno}"
    try:
        xattrs = sorted(os.listxattr(path))
    except OSError as exc:
        xattrs = f"error {exc.errno}"
    try:
        entries = sorted(os.listdir(path))
    except OSError as exc:
        entries = f"error {exc.errno}"
    seen[path] = [oct(info.st_mode), info.st_uid, info.st_gid, xattrs, entries, flags,
                  info.st_mtime > 1e9, info.st_atime > 1e9]
print(json.dumps(seen, sort_keys=True))
"""
"""What a program can see of the two writable directories (times only as 'not set back to 1970')."""
INVISIBLE_TO_PROBE = {"a file, then removed"}
"""Polluters whose only trace (a newer mtime) the probe cannot tell from a new directory's."""

# A POSIX ACL granting the sandbox's own uid (1000 inside) an extra entry: version 2, then
# (tag, perm, id) for USER_OBJ rwx, USER 1000 r, GROUP_OBJ r-x, MASK rwx, OTHER r-x.
_ACL = struct.pack("<I", 2) + b"".join(
    struct.pack("<HHI", tag, perm, ident)
    for tag, perm, ident in (
        (1, 7, 0xFFFFFFFF),
        (2, 4, 1000),
        (4, 5, 0xFFFFFFFF),
        (16, 7, 0xFFFFFFFF),
        (32, 5, 0xFFFFFFFF),
    )
)
POLLUTER = f"""
import os
def attempt(call, *args):
    try:
        call(*args)
    except OSError:
        pass
for path in ("/workspace", "/tmp"):
    open(path + "/left-behind", "w").close()
    attempt(os.setxattr, path, "user.poison", b"1")
    attempt(os.setxattr, path, "system.posix_acl_access", {_ACL!r})
    attempt(os.utime, path, (0, 0))
attempt(os.chmod, "/tmp", 0o700)
attempt(os.chmod, "/workspace", 0)
"""
"""chmod 000 /workspace, /tmp without its sticky bit, xattrs, an ACL, times at the epoch, a file each."""


def _probe(result: Any) -> dict[str, Any]:
    assert result.ok, result
    seen: dict[str, Any] = json.loads(result.stdout)
    return seen


async def _fresh_probe() -> dict[str, Any]:
    """The probe in a sandbox on a newly made workspace (not a spare, which might be what is tested)."""
    from posttrain.sandbox.sandbox import SPARES

    SPARES.drain()
    async with Sandbox.create(spec()) as sb:
        return _probe(await sb.exec([PY, "-c", PROBE]))


SINGLE_POLLUTERS = {
    "chmod 000 /workspace": "os.chmod('/workspace', 0)",
    "chmod 0700 /tmp (no sticky bit)": "os.chmod('/tmp', 0o700)",
    "chmod 1777 /workspace": "os.chmod('/workspace', 0o1777)",
    "xattr on /tmp": "os.setxattr('/tmp', 'user.poison', b'1')",
    "xattr on /workspace": "os.setxattr('/workspace', 'user.poison', b'1')",
    "ACL on /workspace": f"os.setxattr('/workspace', 'system.posix_acl_access', {_ACL!r})",
    "default ACL on /tmp": f"os.setxattr('/tmp', 'system.posix_acl_default', {_ACL!r})",
    "times at the epoch": "os.utime('/workspace', (0, 0)); os.utime('/tmp', (0, 0))",
    "atime only": "os.utime('/tmp', (1, os.stat('/tmp').st_mtime))",
    "chattr +A +d": "import fcntl\nfor p in ('/workspace', '/tmp'):\n"
    "    fd = os.open(p, os.O_RDONLY)\n    fcntl.ioctl(fd, 0x40086602, (0x80 | 0x40).to_bytes(8, 'little'))",
    "an empty subdirectory": "os.mkdir('/tmp/d', 0)",
    "a file, then removed": "open('/tmp/x', 'w').close(); os.unlink('/tmp/x')",
    "everything at once": POLLUTER,
}
"""One change each, so that changes made without leaving an entry behind are covered on their own."""


@requires_bwrap
def test_a_pooled_run_sees_new_directories_after_a_run_poisoned_them() -> None:
    async def go() -> dict[str, Any]:
        seen, polluted = {}, {}
        async with SandboxPool(spec(), size=1) as pool:
            for name, code in SINGLE_POLLUTERS.items():
                polluted[name] = _probe(await pool.run([PY, "-c", "import os\n" + code + "\n" + PROBE]))
                seen[name] = _probe(await pool.run([PY, "-c", PROBE]))
        fresh = await _fresh_probe()
        unseen = {name for name, probe in polluted.items() if probe == fresh}
        assert unseen == INVISIBLE_TO_PROBE  # every other polluter did change what the probe sees
        return {name: probe for name, probe in seen.items() if probe != fresh}

    assert run(go()) == {}


@requires_bwrap
def test_a_spare_reused_by_run_sync_with_another_spec_is_not_poisoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from posttrain.sandbox.sandbox import SPARES

    SPARES.drain()
    first = run_sync([PY, "-c", POLLUTER], spec(timeout_s=5.0))
    assert first.ok, first
    created: list[int] = []
    original = Workspace.create.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Workspace], *args: Any, **kwargs: Any) -> Workspace:
        created.append(1)
        return original(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Workspace, "create", classmethod(counting))
    other = spec(timeout_s=7.0, memory_mb=200, pids=40, env={"OTHER": "1"}, network="loopback")
    after = _probe(run_sync([PY, "-c", PROBE], other))
    assert created == []  # the spare of the poisoned run was reused
    monkeypatch.undo()
    assert after == run(_fresh_probe())


@requires_bwrap
def test_restore_gives_new_directories_after_a_run_poisoned_them() -> None:
    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Sandbox.create(spec()) as sb:
            snap = await sb.snapshot()
            assert (await sb.exec([PY, "-c", POLLUTER])).ok
            await sb.restore(snap)
            after = _probe(await sb.exec([PY, "-c", PROBE]))
        return after, await _fresh_probe()

    after, fresh = run(go())
    assert after == fresh


@requires_bwrap
def test_a_fork_of_a_poisoned_sandbox_gets_new_directories() -> None:
    metadata_only = POLLUTER.replace('open(path + "/left-behind", "w").close()', "pass")

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Sandbox.create(spec()) as sb:
            assert (await sb.exec([PY, "-c", metadata_only])).ok
            child = await sb.fork()
            try:
                after = _probe(await child.exec([PY, "-c", PROBE]))
            finally:
                await child.close()
        return after, await _fresh_probe()

    after, fresh = run(go())
    assert after == fresh


def test_without_mounts_a_reset_restores_the_directories_own_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from posttrain.sandbox import workspace as workspace_module

    monkeypatch.setattr(workspace_module, "_mount_tmpfs", lambda *args: False)
    space = Workspace.create(8, os.geteuid(), base=tmp_path)
    try:
        assert space.layers is None
        for path in (space.work, space.tmp):
            (path / "left-behind").write_bytes(b"x")
            with contextlib.suppress(OSError):  # no user xattrs on this file system: the rest still applies
                os.setxattr(path, "user.poison", b"1")
            os.utime(path, (0, 0))
            os.chmod(path, 0)
        space.reset()
        for path, mode in ((space.work, 0o755), (space.tmp, 0o1777)):
            info = os.lstat(path)
            assert (oct(info.st_mode & 0o7777), os.listxattr(path), os.listdir(path)) == (oct(mode), [], [])
            assert info.st_mtime > 1e9 and info.st_atime > 1e9
    finally:
        space.close()


NON_ROOT_RESET = """
import os, pathlib, sys
from posttrain.sandbox import workspace
workspace._mount_tmpfs = lambda *args: False
space = workspace.Workspace.create(8, os.geteuid(), base=pathlib.Path(sys.argv[1]))
for path in (space.work, space.tmp):
    (path / "d").mkdir()
    (path / "d" / "f").write_text("x")
    os.chmod(path / "d", 0)
    os.chmod(path, 0)
space.reset()
fresh = space.is_fresh()
(space.work / "kept").write_text("1")
space.snapshot_to(pathlib.Path(sys.argv[1]) / "snap")
os.chmod(space.work, 0)
os.chmod(space.tmp, 0)
space.restore_from(pathlib.Path(sys.argv[1]) / "snap")
print(fresh, sorted(os.listdir(space.work)), oct(os.stat(space.work).st_mode), oct(os.stat(space.tmp).st_mode))
space.close()
"""


@requires_root
def test_without_root_a_reset_and_a_restore_get_past_directories_the_program_locked() -> None:
    """As a plain user, mode 000 on the workspace and on a subdirectory must not stop the reset."""
    nobody = 65534
    base = Path(tempfile.mkdtemp(prefix="posttrain-nonroot-"))  # pytest's tmp_path is root-only
    try:
        os.chown(base, nobody, nobody)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        argv = ["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups", sys.executable]
        done = subprocess.run(
            [*argv, "-c", NON_ROOT_RESET, str(base)], capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "['kept']", "0o40755", "0o41777"]


@requires_bwrap
@requires_root
def test_recycling_after_20k_files_leaves_their_deletion_off_the_next_runs_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from posttrain.sandbox import reaper

    release = threading.Event()
    real_delete = reaper.delete_tree
    held: list[str] = []

    def held_delete(path: str) -> None:
        held.append(path)
        release.wait(60)
        real_delete(path)

    monkeypatch.setattr(reaper, "delete_tree", held_delete)
    unlinks: list[str] = []
    real_unlink, real_rmdir = os.unlink, os.rmdir

    def counted(real: Any) -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name != "sandbox-reaper":
                unlinks.append(str(path))
            return real(path, *args, **kwargs)

        return call

    many = "import os\nfor d in ('/workspace', '/tmp'):\n    for i in range(10000): open(f'{d}/f{i}', 'w').close()"

    async def go() -> tuple[Any, int]:
        async with SandboxPool(spec(disk_mb=64), size=1) as pool:
            assert (await pool.run([PY, "-c", many])).ok
            monkeypatch.setattr(os, "unlink", counted(real_unlink))
            monkeypatch.setattr(os, "rmdir", counted(real_rmdir))
            # The pool's one sandbox is recycled before this run can start.
            after = await pool.run(["/bin/sh", "-c", "ls -A /workspace /tmp | wc -l"])
            monkeypatch.setattr(os, "unlink", real_unlink)
            monkeypatch.setattr(os, "rmdir", real_rmdir)
            return after, reaper.REAPER.pending()

    try:
        after, pending = run(go())
    finally:
        release.set()
    assert after.ok and after.stdout.strip() == b"3"  # "/tmp:", "", "/workspace:" and nothing else
    assert pending >= 1 and held  # the old directories were still being deleted when the run ended
    assert len(unlinks) < 50, unlinks[:10]  # the recycle itself deleted (almost) nothing
    assert reaper.REAPER.settle(60)


@requires_bwrap
def test_a_clean_exit_leaves_no_cgroup_directory() -> None:
    from posttrain.sandbox.cgroups import V1Manager, V2Manager, detect

    manager, _ = detect()
    if manager is None:
        pytest.skip("no cgroups here")
    script = """
import asyncio, os
from posttrain.sandbox import SandboxPool, SandboxSpec, run_sync
spec = SandboxSpec(timeout_s=10, memory_mb=128, disk_mb=16)
assert run_sync(["true"], spec).ok
assert run_sync(["true"], spec.model_copy(update={"cpus": 1.0})).ok
async def main():
    async with SandboxPool(spec, size=2) as pool:
        assert (await pool.run(["true"])).ok
asyncio.run(main())
print(os.getpid())
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    bases = list(manager.mounts.values()) if isinstance(manager, V1Manager) else [manager.root]
    assert isinstance(manager, V1Manager | V2Manager)
    left = [base / f"posttrain-sandbox-{pid}" for base in bases]
    assert [path for path in left if path.exists()] == []


@requires_bwrap
def test_mountinfo_inside_names_no_host_state_path_or_trainer_pid() -> None:
    async def persistent() -> bytes:
        async with Sandbox.create(spec()) as sb:
            await sb.snapshot()  # a lower layer too
            return (await sb.exec(["cat", "/proc/self/mountinfo"])).stdout

    for text in (run(persistent()), run_sync(["cat", "/proc/self/mountinfo"], spec()).stdout):
        assert b"/workspace" in text and b"/tmp" in text
        assert str(state_base()).encode() not in text
        assert b"posttrain-sandbox" not in text and f"/{os.getpid()}-".encode() not in text


@requires_bwrap
@requires_root
def test_a_run_after_one_that_filled_the_disk_gets_the_whole_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leftovers the reaper has not deleted yet would eat the next run's disk_mb and memory: a large
    leftover keeps the slot out of rotation until it is gone (the deletion is slowed down here)."""
    from posttrain.sandbox import reaper

    real_delete = reaper.delete_tree

    def slow_delete(path: str) -> None:
        threading.Event().wait(0.5)
        real_delete(path)

    monkeypatch.setattr(reaper, "delete_tree", slow_delete)
    fill = "head -c 24000000 /dev/zero > /workspace/big && echo written"

    async def go() -> list[Any]:
        async with SandboxPool(spec(disk_mb=32, memory_mb=64), size=1) as pool:
            return [await pool.run(["/bin/sh", "-c", fill]) for _ in range(2)]

    first, second = run(go())
    assert first.ok and first.stdout == b"written\n"
    assert second.ok and second.stdout == b"written\n", (second.status, second.stderr)
    assert reaper.REAPER.settle(30)
