"""A seccomp-BPF filter, assembled here as raw `struct sock_filter` bytes for `bwrap --seccomp`.

Guarantees: on x86_64 and aarch64 the filter returns EPERM for ptrace, process_vm_readv/writev, every
mount-family call (old and new API, statmount/listmount included), bpf, keyctl, perf_event_open, kexec,
module loading, unshare/setns, clone with any namespace flag, io_uring, userfaultfd and the
TIOCSTI/TIOCLINUX ioctls; clone3 gets ENOSYS so libc falls back to clone, whose flags can be inspected;
every syscall number above `MAX_KNOWN_NR` (calls added to Linux after this list was written) gets ENOSYS,
so new kernel interfaces are closed until someone reviews them; x32 system calls are refused.
`socket`/`socketpair` take an allowlist of address families: AF_UNIX and route netlink always, AF_INET
and AF_INET6 only without `deny_inet` (loopback mode); the internet families get EPERM under `deny_inet`
and every other family (vsock, packet, bluetooth, AF_ALG, ...) EAFNOSUPPORT. A foreign architecture
kills the process.
Not here: anything other than this one filter (no libseccomp needed); other architectures return None.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
LD_W_ABS = 0x20
JEQ_K = 0x15
JGT_K = 0x25
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
OFF_NR, OFF_ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # seccomp_data.args[i], low 32 bits on little-endian


TIOCSTI, TIOCLINUX = 0x5412, 0x541C
CLONE_NS_FLAGS = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
)
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
NETLINK_ROUTE = 0
"""Route netlink is what glibc's getifaddrs/if_nameindex (and `ip`) use; it sees only the sandbox's netns."""
INET_FAMILIES = (AF_INET, AF_INET6)
MAX_KNOWN_NR = 469
"""Highest syscall number reviewed for this filter (file_setattr, Linux 6.17; since 424 the new calls are
numbered alike on every architecture); anything above answers ENOSYS, as on an older kernel."""

DENIED_NAMES: tuple[str, ...] = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "bpf", "keyctl",
    "add_key", "request_key", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "unshare", "setns", "swapon", "swapoff", "reboot", "open_by_handle_at",
    "name_to_handle_at", "userfaultfd", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "syslog",
    "quotactl", "vhangup", "pidfd_getfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "quotactl_fd", "statmount", "listmount", "open_tree_attr",
)  # fmt: skip


@dataclass(frozen=True)
class ArchTable:
    audit_arch: int
    numbers: dict[str, int]
    x32_bit: int | None = None


# fmt: off
_COMMON_NEW = {"pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
               "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
               "fspick": 433, "clone3": 435, "mount_setattr": 442, "quotactl_fd": 443, "statmount": 457,
               "listmount": 458, "open_tree_attr": 467}
"""Syscalls added since Linux 5.1, numbered alike on every architecture.

The new calls between 436 and `MAX_KNOWN_NR` not listed here (landlock, memfd_secret, futex_waitv and the
futex2 calls, cachestat, fchmodat2, map_shadow_stack, lsm_*_self_attr, mseal, *xattrat, file_getattr/
setattr, ...) act only on the caller's own memory, files and credentials and stay allowed."""
_NUMBERS = {  # name: (x86_64, aarch64)
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "bpf": (321, 280),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "perf_event_open": (298, 241),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "unshare": (272, 97), "setns": (308, 268),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264), "userfaultfd": (323, 282), "acct": (163, 89),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "adjtimex": (159, 171),
    "clock_adjtime": (305, 266), "syslog": (103, 116), "quotactl": (179, 60), "vhangup": (153, 58),
    "ioctl": (16, 29), "clone": (56, 220), "socket": (41, 198), "socketpair": (53, 199),
}
# fmt: on
X86_64 = ArchTable(
    0xC000003E, {name: nr[0] for name, nr in _NUMBERS.items()} | _COMMON_NEW, x32_bit=0x40000000
)
AARCH64 = ArchTable(0xC00000B7, {name: nr[1] for name, nr in _NUMBERS.items()} | _COMMON_NEW)
ARCHES: dict[str, ArchTable] = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


class _Program:
    """Tiny assembler: instructions with symbolic jump targets, resolved to relative offsets."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.code):
            out += struct.pack("<HBBI", code, self._rel(index, jt), self._rel(index, jf), k & 0xFFFFFFFF)
        return bytes(out)

    def _rel(self, index: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"jump to {target} out of range")
        return offset


def build_filter(deny_inet: bool, machine: str | None = None) -> bytes | None:
    """The filter for this (or the named) machine, or None when its architecture is unknown."""
    table = ARCHES.get((machine or platform.machine()).lower())
    if table is None:
        return None
    nr = table.numbers
    p = _Program()
    p.op(LD_W_ABS, OFF_ARCH)
    p.op(JEQ_K, table.audit_arch, 0, "kill")
    p.op(LD_W_ABS, OFF_NR)
    if table.x32_bit is not None:
        p.op(JGE_K, table.x32_bit, "deny", 0)
    p.op(JGT_K, MAX_KNOWN_NR, "enosys", 0)
    for name in DENIED_NAMES:
        p.op(JEQ_K, nr[name], "deny", 0)
    p.op(JEQ_K, nr["clone3"], "enosys", 0)
    p.op(JEQ_K, nr["ioctl"], "ioctl", 0)
    p.op(JEQ_K, nr["clone"], "clone", 0)
    p.op(JEQ_K, nr["socket"], "socket", 0)
    p.op(JEQ_K, nr["socketpair"], "socket", 0)
    p.op(RET_K, RET_ALLOW)
    p.label("ioctl")
    p.op(LD_W_ABS, _arg_low(1))
    p.op(JEQ_K, TIOCSTI, "deny", 0)
    p.op(JEQ_K, TIOCLINUX, "deny", 0)
    p.op(RET_K, RET_ALLOW)
    p.label("clone")
    p.op(LD_W_ABS, _arg_low(0))
    p.op(JSET_K, CLONE_NS_FLAGS, "deny", 0)
    p.op(RET_K, RET_ALLOW)
    _socket_families(p, deny_inet)
    p.label("deny")
    p.op(RET_K, RET_ERRNO | errno.EPERM)
    p.label("enosys")
    p.op(RET_K, RET_ERRNO | errno.ENOSYS)
    p.label("kill")
    p.op(RET_K, RET_KILL_PROCESS)
    return p.assemble()


def _socket_families(p: _Program, deny_inet: bool) -> None:
    """`socket`/`socketpair` by family allowlist (arg 0); netlink only with protocol NETLINK_ROUTE (arg 2)."""
    p.label("socket")
    p.op(LD_W_ABS, _arg_low(0))
    p.op(JEQ_K, AF_UNIX, "socket_ok", 0)
    for family in INET_FAMILIES:
        p.op(JEQ_K, family, "deny" if deny_inet else "socket_ok", 0)
    p.op(JEQ_K, AF_NETLINK, 0, "no_family")
    p.op(LD_W_ABS, _arg_low(2))
    p.op(JEQ_K, NETLINK_ROUTE, "socket_ok", 0)
    p.label("no_family")
    p.op(RET_K, RET_ERRNO | errno.EAFNOSUPPORT)
    p.label("socket_ok")
    p.op(RET_K, RET_ALLOW)
