"""Adversarial programs against the kernel interface: socket families, unreviewed syscalls, per-user budgets.

Issue 18 findings 4 (one host uid shared every per-user kernel budget) and 5 (vsock reachable with
`network: none`; new syscall numbers open by default).
"""

from __future__ import annotations

import asyncio
import errno
import platform
from pathlib import Path

import pytest

from posttrain.sandbox import Sandbox
from posttrain.sandbox.host import UidSlots, host_features
from posttrain.sandbox.seccomp import MAX_KNOWN_NR
from tests.sandbox.helpers import PY, py, requires_bwrap, requires_root, run, spec

pytestmark = requires_bwrap
LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
SOCKET = LIBC + (
    "import sys\nargs = [int(a) for a in sys.argv[1:]]\n"
    "fd = libc.socket(*args)\nprint(0 if fd >= 0 else ctypes.get_errno())\n"
)
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_ALG, AF_BLUETOOTH, AF_VSOCK = (
    1,
    2,
    10,
    16,
    17,
    38,
    31,
    40,
)
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
NETLINK_ROUTE, NETLINK_SOCK_DIAG, NETLINK_KOBJECT_UEVENT = 0, 4, 15


def _socket_errno(family: int, kind: int, proto: int = 0, network: str = "none") -> int:
    result = run(_exec_in_fresh([PY, "-c", SOCKET, str(family), str(kind), str(proto)], network=network))
    assert result.ok, result
    return int(result.stdout)


async def _exec_in_fresh(argv: list[str], **fields: object) -> object:
    async with Sandbox.create(spec(**fields)) as sb:
        return await sb.exec(argv)


@pytest.mark.parametrize("network", ["none", "loopback"])
@pytest.mark.parametrize(
    ("family", "kind", "proto"),
    [
        (AF_VSOCK, SOCK_STREAM, 0),  # would reach host vsock ports (Firecracker/VM hosts)
        (AF_PACKET, SOCK_RAW, 0),
        (AF_ALG, SOCK_SEQPACKET, 0),
        (AF_BLUETOOTH, SOCK_STREAM, 0),
        (AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG),
        (AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT),
    ],
)
def test_socket_families_outside_the_allowlist_are_refused(
    family: int, kind: int, proto: int, network: str
) -> None:
    assert _socket_errno(family, kind, proto, network) in (errno.EAFNOSUPPORT, errno.EPERM)


@pytest.mark.parametrize("network", ["none", "loopback"])
def test_unix_and_route_netlink_sockets_work(network: str) -> None:
    assert _socket_errno(AF_UNIX, SOCK_STREAM, network=network) == 0
    assert _socket_errno(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, network=network) == 0


def test_socketpair_of_a_foreign_family_is_refused_and_unix_pairs_work() -> None:
    code = LIBC + (
        "import socket\nfds = (ctypes.c_int * 2)()\n"
        "print(libc.socketpair(40, 1, 0, fds), ctypes.get_errno())\n"
        "a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1).decode())\n"
    )
    result = py(code)
    assert result.stdout.split() == [b"-1", str(errno.EAFNOSUPPORT).encode(), b"x"], result


def test_inet_sockets_work_with_loopback_and_not_without() -> None:
    assert _socket_errno(AF_INET, SOCK_STREAM, network="loopback") == 0
    assert _socket_errno(AF_INET6, SOCK_DGRAM, network="loopback") == 0
    assert _socket_errno(AF_INET, SOCK_STREAM, network="none") == errno.EPERM
    assert _socket_errno(AF_INET6, SOCK_DGRAM, network="none") == errno.EPERM


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"), reason="filter arch"
)
def test_unreviewed_and_mount_family_syscalls_are_refused() -> None:
    # 443 quotactl_fd, 457 statmount, 458 listmount, 467 open_tree_attr (same numbers on both arches);
    # above MAX_KNOWN_NR a call must look like an unimplemented one (ENOSYS), even where the kernel has it.
    numbers = [443, 457, 458, 467, MAX_KNOWN_NR + 1, 470, 500, 1000, 0x3FFFFFFF]
    code = (
        LIBC
        + "import sys\nfor n in map(int, sys.argv[1:]):\n    libc.syscall(n, 0, 0, 0, 0, 0); print(ctypes.get_errno())\n"
    )
    result = run(_exec_in_fresh([PY, "-c", code, *map(str, numbers)]))
    errors = [int(v) for v in result.stdout.split()]
    assert errors[:4] == [errno.EPERM] * 4, result
    assert errors[4:] == [errno.ENOSYS] * (len(numbers) - 4), result


def test_known_syscalls_below_the_cutoff_still_work() -> None:
    # futex_waitv (449) with no waiters answers EINVAL, fchmodat2 (452) works: the cutoff is not too low.
    code = LIBC + (
        "libc.syscall(449, 0, 0, 0, 0, 0); print(ctypes.get_errno())\n"
        "open('f', 'w').close()\nprint(libc.syscall(452, -100, b'f', 0o600, 0), oct(__import__('os').stat('f').st_mode & 0o777))\n"
    )
    result = py(code)
    lines = result.stdout.split()
    assert int(lines[0]) != errno.ENOSYS and lines[1:] == [b"0", b"0o600"], result


# --- finding 4: per-user kernel budgets are per sandbox -------------------------------------------

HOG = LIBC + (
    "import os, sys, time\nkind, n = sys.argv[1], 0\n"
    "while n < 100000:\n"
    "    if kind == 'mqueue':\n"
    "        fd = libc.mq_open(f'/q{n}'.encode(), os.O_CREAT | os.O_RDWR, 0o600, None)\n"
    "    else:\n"
    "        fd = libc.inotify_init()\n"
    "    if fd < 0:\n"
    "        break\n"
    "    n += 1\n"
    "with open('.full', 'w') as f:\n"
    "    f.write(f'{n} {ctypes.get_errno()}')\n"
    "os.rename('.full', 'full')\n"
    "while not os.path.exists('done'):\n"  # hold every instance while another sandbox tries
    "    time.sleep(0.02)\n"
)
PROBE = LIBC + (
    "import os, sys\n"
    "fd = libc.mq_open(b'/probe', os.O_CREAT | os.O_RDWR, 0o600, None) if sys.argv[1] == 'mqueue' else libc.inotify_init()\n"
    "print(0 if fd >= 0 else ctypes.get_errno())\n"
)


async def _read_when_present(sb: Sandbox, name: str, attempts: int = 1000) -> bytes:
    for _ in range(attempts):
        try:
            return await sb.read_file(name)
        except OSError:
            await asyncio.sleep(0.02)
    raise AssertionError(f"{name} never appeared")


@requires_root
@pytest.mark.parametrize("kind", ["mqueue", "inotify"])
@pytest.mark.parametrize("persistent_probe", [True, False])
def test_one_sandbox_exhausting_a_per_user_budget_leaves_others_theirs(
    kind: str, persistent_probe: bool
) -> None:
    if host_features().uid_slots is None:
        pytest.skip("sandboxes do not get host uids of their own here")

    async def go() -> tuple[list[bytes], bytes]:
        async with Sandbox.create(spec(timeout_s=60.0)) as hog:
            task = asyncio.create_task(hog.exec([PY, "-c", HOG, kind]))
            full = (await _read_when_present(hog, "full")).split()
            try:
                async with Sandbox.create(spec(), persistent=persistent_probe) as other:
                    probe = await other.exec([PY, "-c", PROBE, kind])
            finally:
                await hog.write_file("done", b"")
                assert (await task).ok
            return full, probe.stdout

    full, probe = run(go())
    assert int(full[0]) > 0 and int(full[1]) != 0  # the hog really ran out of its budget
    assert probe == b"0\n"  # ... and the other sandbox still has all of its own


def _uids_of(pids: list[int]) -> set[int]:
    uids = set()
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uids.add(int(next(line for line in text.splitlines() if line.startswith("Uid:")).split()[1]))
    return uids


@requires_root
def test_live_sandboxes_run_as_distinct_host_uids() -> None:
    features = host_features()
    if features.uid_slots is None or features.cgroups is None:
        pytest.skip("needs per-sandbox uids and cgroups (processes are found by cgroup)")

    async def go() -> list[set[int]]:
        async with (
            Sandbox.create(spec()) as a,
            Sandbox.create(spec()) as b,
            Sandbox.create(spec(), persistent=False) as c,
        ):
            found = []
            for sb in (a, b, c):
                task = asyncio.create_task(sb.exec(["sh", "-c", "touch started; sleep 30"], timeout_s=1.0))
                await _read_when_present(sb, "started")
                assert sb.ctx.cgroup is not None
                found.append(_uids_of(sb.ctx.cgroup.pids()))
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            return found

    found = run(go())
    assert all(len(uids) == 1 for uids in found), found  # every process of a sandbox has its uid
    assert len(set.union(*found)) == 3, found
    assert set.union(*found) <= set(host_features().uid_slots.uids)  # type: ignore[union-attr]


HOLDER = (
    "import sys\nfrom pathlib import Path\nfrom posttrain.sandbox.host import UidSlots\n"
    "slots = UidSlots(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))\n"
    "print(slots.acquire(), flush=True)\nsys.stdin.read()\n"
)


def test_uid_slots_are_exclusive_across_processes_and_freed_when_the_holder_dies(tmp_path: Path) -> None:
    import subprocess
    import sys

    first = 300000  # no process runs as these
    argv = [sys.executable, "-c", HOLDER, str(first), "2", str(tmp_path)]
    holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"PYTHONPATH": "."})
    assert holder.stdout is not None
    taken = int(holder.stdout.readline())
    slots = UidSlots(first, 2, tmp_path)
    mine = slots.acquire()
    assert mine != taken  # the other process's flock keeps its uid
    with pytest.raises(OSError):
        slots.acquire()  # both are taken now
    holder.kill()  # dies without releasing: the kernel drops its flock
    holder.wait()
    assert slots.acquire() == taken
    slots.release(mine)
    assert slots.acquire() == mine


def test_a_uid_is_held_until_its_last_holder_releases_it(tmp_path: Path) -> None:
    slots = UidSlots(300000, 1, tmp_path)
    uid = slots.acquire()
    assert slots.retain(uid)
    slots.release(uid)
    with pytest.raises(OSError):
        slots.acquire()  # one holder is left
    slots.release(uid)
    assert slots.acquire() == uid and not slots.retain(uid + 1)


@requires_root
def test_a_uid_some_process_still_runs_as_is_not_handed_out(tmp_path: Path) -> None:
    import subprocess

    first = 300000
    straggler = subprocess.Popen(["sleep", "30"], user=first, group=first)  # e.g. left by a crashed host
    try:
        assert UidSlots(first, 2, tmp_path).acquire() == first + 1
    finally:
        straggler.kill()
        straggler.wait()
