"""Adversarial programs against the kernel interface: socket families, unreviewed syscalls, per-user budgets.

Issue 18 findings 4 (one host uid shared every per-user kernel budget) and 5 (vsock reachable with
`network: none`; new syscall numbers open by default).
"""

from __future__ import annotations

import errno
import platform

import pytest

from posttrain.sandbox import Sandbox
from posttrain.sandbox.seccomp import MAX_KNOWN_NR
from tests.sandbox.helpers import PY, py, requires_bwrap, run, spec

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
