"""Differential test: after any polluting program, the next run in a pooled slot sees a new sandbox.

A probe program prints a canonical JSON of everything a program can observe of its sandbox: the files
under every writable path with their metadata, SysV IPC objects, POSIX message queues it knows the
names of, its rlimits, nice value, CPU affinity, I/O priority, OOM score, environment, open fds, cwd,
umask, visible processes and mounts. Each polluter runs in a pool of one sandbox, then the probe runs
in the same slot; the probe's output must equal the probe's output in a sandbox created just for it.

Normalised, and why: timestamps are reduced to "within the last hour" (a new sandbox's `/dev` is made
at its own run, so exact times differ between any two sandboxes; a polluter that backdates a file or
directory still shows); mount lines keep only the mount point, type and per-mount options (the
workspace's host path differs between slots by design); fd targets keep only their kind.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from posttrain.sandbox import Sandbox, SandboxPool

from .helpers import PY, requires_bwrap, run, spec

pytestmark = requires_bwrap

MQ_NAMES = ("/posttrain-q", "/q")
PROBE = r"""
import ctypes, json, os, resource, stat, sys, time
libc = ctypes.CDLL(None, use_errno=True)
NOW = time.time()
ROOTS = ("/workspace", "/tmp", "/dev", "/dev/shm", "/dev/mqueue")

def recent(t):
    return NOW - 3600 < t < NOW + 60

def xattrs(path):
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
    except OSError as exc:
        return exc.errno
    out = {}
    for name in names:
        try:
            out[name] = os.getxattr(path, name, follow_symlinks=False).hex()
        except OSError as exc:
            out[name] = exc.errno
    return out

def entry(path):
    info = os.lstat(path)
    kind = stat.S_IFMT(info.st_mode)
    item = {"mode": oct(info.st_mode), "uid": info.st_uid, "gid": info.st_gid, "nlink": info.st_nlink,
            "xattrs": xattrs(path), "mtime_recent": recent(info.st_mtime), "ctime_recent": recent(info.st_ctime)}
    if stat.S_ISLNK(info.st_mode):
        item["target"] = os.readlink(path)
    elif stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
        item["rdev"] = [os.major(info.st_rdev), os.minor(info.st_rdev)]
        item.pop("mtime_recent"); item.pop("ctime_recent")  # the host's device node: its times are the host's
    elif not stat.S_ISDIR(info.st_mode):
        item["size"] = info.st_size
    return item

def tree(root):
    found = {}
    if not os.path.lexists(root):
        return None
    found["."] = entry(root)
    if not os.path.isdir(root) or os.path.islink(root):
        return found
    for top, dirs, files in os.walk(root, onerror=lambda exc: found.setdefault("!" + str(exc.filename), exc.errno)):
        for name in dirs + files:
            path = os.path.join(top, name)
            found[os.path.relpath(path, root)] = entry(path)
    return found

def statfs(path):
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return exc.errno
    return [st.f_blocks, st.f_bfree, st.f_files, st.f_ffree, st.f_flag]

def sysvipc():
    out = {}
    for name in ("shm", "msg", "sem"):
        with open("/proc/sysvipc/" + name) as handle:
            out[name] = handle.read().splitlines()[1:]
    return out

def mqueues():
    libc.mq_open.restype = ctypes.c_int
    out = {}
    for name in NAMES:
        fd = libc.mq_open(name.encode(), os.O_RDONLY)
        out[name] = "exists" if fd >= 0 else ctypes.get_errno()
        if fd >= 0:
            os.close(fd)
    return out

def fds():
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        out[name] = target.split(":")[0] if ":" in target else target
    return out

def processes():
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open("/proc/%s/cmdline" % name, "rb") as handle:
                    out.append([int(name), handle.read().decode(errors="replace")])
            except OSError:
                pass
    return sorted(out)

def mounts():
    out = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            out.append([fields[4], fields[fields.index("-") + 1], fields[5]])
    return out

def ioprio():
    number = {"x86_64": 252, "aarch64": 31}[os.uname().machine]
    return libc.syscall(number, 1, 0)  # ioprio_get(IOPRIO_WHO_PROCESS, self)

def status_fields():
    keep = ("SigIgn", "SigBlk", "SigCgt", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
            "Seccomp", "Seccomp_filters", "Uid", "Gid", "Groups")
    out = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in keep:
                out[key] = value.strip()
    return out

mask = os.umask(0)
os.umask(mask)
state = {
    "files": {root: tree(root) for root in ROOTS},
    "statfs": {root: statfs(root) for root in ROOTS},
    "sysvipc": sysvipc(), "mqueues": mqueues(),
    "rlimits": {name: resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")},
    "nice": os.getpriority(os.PRIO_PROCESS, 0), "affinity": sorted(os.sched_getaffinity(0)),
    "ioprio": ioprio(), "oom_score_adj": open("/proc/self/oom_score_adj").read().strip(),
    "sched": os.sched_getscheduler(0), "env": dict(os.environ), "fds": fds(), "cwd": os.getcwd(),
    "umask": mask, "processes": processes(), "mounts": mounts(), "status": status_fields(),
    "hostname": os.uname().nodename, "ids": [os.getuid(), os.getgid(), os.getgroups()],
    "uid_map": open("/proc/self/uid_map").read().split(), "pgid_is_pid": os.getpgid(0) == os.getpid(),
}
print(json.dumps(state, sort_keys=True))
""".replace("NAMES", repr(MQ_NAMES))

SYSV = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "print(libc.shmget(0x1234, 65536, 0o1666), libc.msgget(0x2345, 0o1666), libc.semget(0x3456, 3, 0o1666))\n"
    "shm = libc.shmget(0, 4096, 0o1600)\n"  # IPC_PRIVATE, left attached by nobody
)
MQUEUE = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "fd = libc.mq_open(b'/posttrain-q', os.O_CREAT | os.O_RDWR, 0o666, None)\n"
    "assert fd >= 0, ctypes.get_errno()\n"
    "assert libc.mq_send(fd, b'secret', 6, 0) == 0\n"
    "assert libc.mq_open(b'/q', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0\n"
)
def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def py(code: str) -> list[str]:
    return [PY, "-c", code]


POLLUTERS: dict[str, list[str]] = {
    "dev_shm_ballast": sh("head -c 90000000 /dev/zero > /dev/shm/ballast && sync"),
    "dev_shm_many_files": sh("cd /dev/shm && for i in $(seq 1 300); do echo $i > f$i; done; chmod 4777 f1"),
    "dev_shm_fifo_socket_link": py(
        "import os, socket\nos.mkfifo('/dev/shm/fifo')\nsocket.socket(socket.AF_UNIX).bind('/dev/shm/sock')\n"
        "os.symlink('/workspace', '/dev/shm/link')\nos.mkdir('/dev/shm/d', 0o700)"
    ),
    "dev_stdout_replaced": sh(
        "rm -f /dev/stdout /dev/stderr && ln -s /dev/shm/captured /dev/stdout && ln -s /dev/shm/err /dev/stderr"
    ),
    "dev_entries_added": sh("mkdir /dev/mqueue /dev/x && touch /dev/newfile && ln -s /tmp /dev/fd2 && rm /dev/ptmx"),
    "dev_modes_changed": sh("chmod 777 /dev && chmod 000 /dev/shm && chmod 1777 /dev/pts 2>/dev/null; true"),
    "dev_xattr_and_times": py(
        "import os\nfor path in ('/dev/shm', '/dev', '/dev/pts', '/dev/null'):\n"
        "    for act in (lambda: os.setxattr(path, 'user.mark', b'1'), lambda: os.utime(path, (0, 0))):\n"
        "        try: act()\n        except OSError: pass"
    ),
    "dev_null_replaced": sh("umount /dev/null 2>/dev/null; rm -f /dev/null; echo data > /dev/null; true"),
    "sysv_ipc_objects": py(SYSV),
    "sysv_ipc_by_ipcmk": sh("ipcmk -M 8192 && ipcmk -Q && ipcmk -S 4"),
    "posix_mqueue": py(MQUEUE),
    "workspace_chmod": sh("chmod 000 /workspace"),
    "workspace_xattr": py("import os\nos.setxattr('/workspace', 'user.secret', b'leak')"),
    "workspace_utime": py("import os\nos.utime('/workspace', (0, 0))"),
    "tmp_chmod": sh("chmod 700 /tmp"),
    "tmp_xattr_utime": py("import os\nos.setxattr('/tmp', 'user.secret', b'leak')\nos.utime('/tmp', (0, 0))"),
    "files_left_in_tmp_and_workspace": py(
        "import os, socket\nos.mkfifo('/tmp/fifo')\nsocket.socket(socket.AF_UNIX).bind('/tmp/sock')\n"
        "open('/tmp/.hidden', 'w').write('x')\nos.mkdir('/tmp/d', 0o000)\nopen('/workspace/.profile', 'w').write('export A=1')"
    ),
    "umask_and_cwd": sh("umask 077; cd /; touch /tmp/x; umask 000"),
    "rlimits_self_and_init": sh(
        "prlimit --pid 1 --nofile=4:4 --as=10000000 --nproc=1 --cpu=1:1; prlimit --pid $$ --nofile=8:8 --stack=100000; "
        "ulimit -n 5; true"
    ),
    "nice_every_pid": py(
        "import os\nfor pid in [int(p) for p in os.listdir('/proc') if p.isdigit()] + [0]:\n"
        "    try: os.setpriority(os.PRIO_PROCESS, pid, 19)\n    except OSError: pass\n"
        "try: os.setpriority(os.PRIO_PGRP, 0, 19)\nexcept OSError: pass\n"
        "try: os.setpriority(os.PRIO_USER, os.getuid(), 19)\nexcept OSError: pass"
    ),
    "affinity_every_pid": sh("for p in $(ls /proc | grep '^[0-9]'); do taskset -p 1 $p; done; true"),
    "ionice_every_pid": sh("for p in $(ls /proc | grep '^[0-9]'); do ionice -c 3 -p $p; done; ionice -c 3 -u 1000; true"),
    "oom_score_adj": sh("echo 0 > /proc/self/oom_score_adj; echo 0 > /proc/1/oom_score_adj; true"),
    "sched_policy": py(
        "import os\nfor pid in (0, 1):\n    try: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))\n"
        "    except OSError: pass"
    ),
    "background_processes": sh(
        "(sleep 100 &); nohup sleep 100 >/dev/null 2>&1 & setsid sh -c 'trap \"\" TERM HUP; sleep 100' & "
        "python3 -c 'import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(100)' & true"
    ),
    "pty_left_open": py(
        "import os, time\nmaster, slave = os.openpty()\nif os.fork() == 0:\n    time.sleep(100)\n"
        "open('/dev/shm/pty', 'w').write(os.ttyname(slave))"
    ),
    "signals_to_init": sh("for s in INT TERM HUP USR1 USR2 QUIT STOP; do kill -$s 1; done; true"),
    "environment_files": sh("echo 'export POLLUTED=1' > /workspace/.profile; echo 'POLLUTED=1' > /tmp/env"),
}


def _probe_in_new_sandbox() -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with Sandbox.create(spec()) as sb:
            result = await sb.exec(py(PROBE))
            assert result.status == "ok", result.stderr
            return json.loads(result.stdout)

    return run(go())


@pytest.fixture(scope="module")
def fresh_state() -> dict[str, Any]:
    return _probe_in_new_sandbox()


def _probe_after(polluter: list[str], fresh: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    async def go() -> tuple[str, dict[str, Any]]:
        async with SandboxPool(spec(), size=1) as pool:
            polluted = await pool.run(polluter)
            await asyncio.sleep(0.05)  # let the slot's next prepared run be made, as between tasks
            result = await pool.run(py(PROBE))
            assert result.status == "ok", (polluted.status, result.status, result.stderr)
            assert pool.stats.infra_errors == 0
            return polluted.status, json.loads(result.stdout)

    return run(go())


def _differences(fresh: Any, seen: Any, where: str = "") -> list[str]:
    if isinstance(fresh, dict) and isinstance(seen, dict):
        found = []
        for key in sorted(set(fresh) | set(seen)):
            found += _differences(fresh.get(key, "<absent>"), seen.get(key, "<absent>"), f"{where}/{key}")
        return found
    return [] if fresh == seen else [f"{where}: fresh {fresh!r} != after the polluter {seen!r}"]


def test_the_probe_sees_the_same_in_any_two_new_sandboxes(fresh_state: dict[str, Any]) -> None:
    assert _differences(fresh_state, _probe_in_new_sandbox()) == []
    assert fresh_state["files"]["/dev"]["."]["mode"] and fresh_state["sysvipc"]["shm"] == []


def test_there_are_at_least_twenty_polluters() -> None:
    assert len(POLLUTERS) >= 20


@pytest.mark.parametrize("name", list(POLLUTERS))
def test_a_polluter_leaves_nothing_for_the_next_run_in_its_slot(name: str, fresh_state: dict[str, Any]) -> None:
    _status, seen = _probe_after(POLLUTERS[name], fresh_state)
    assert _differences(fresh_state, seen) == []
