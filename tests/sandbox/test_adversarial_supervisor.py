"""No program can make its run an infrastructure failure, nor break the slot it ran in.

`sandbox_error` results are retried and never trained on, so a program that could produce one at will
could dodge a bad reward. Each attack here runs in a pool of one sandbox; its result must be a model
status (never `sandbox_error`), and the next run in the same slot must succeed as in a new sandbox.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.sandbox.host import host_features
from posttrain.sandbox.launch import SUPERVISOR_MOUNT, classify

from .helpers import PY, requires_bwrap, run, spec

pytestmark = requires_bwrap

MODEL_STATUSES = {"ok", "runtime_error", "timeout_wall", "timeout_cpu", "memory_limit", "output_limit"}
VISIBLE_PIDS = "me = os.getpid()\npids = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me]\n"
IGNORE_ALL = (
    "import os, signal\n"
    "for s in signal.valid_signals():\n"
    "    if s not in (signal.SIGKILL, signal.SIGSTOP):\n"
    "        signal.signal(s, signal.SIG_IGN)\n"
)
NEXT_RUN = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.inotify_init() >= 0, ctypes.get_errno()
assert libc.mq_open(b"/next", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, ctypes.get_errno()
assert len(os.listdir("/dev/shm")) == 0
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(100)]
print(sys.stdin.read(), "next", len(fds), os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)))
"""


def sh(script: str) -> list[str]:
    return ["/bin/sh", "-c", script]


def py(code: str) -> list[str]:
    return [PY, "-c", code]


ATTACKS: dict[str, list[str]] = {
    "every_signal_to_every_visible_pid": py(
        IGNORE_ALL + VISIBLE_PIDS + "for sig in range(1, 65):\n"
        "    for pid in pids + [-1, os.getppid(), 1]:\n"
        "        try: os.kill(pid, sig)\n        except OSError: pass\n"
        "    if sig not in (signal.SIGKILL, signal.SIGSTOP):\n"
        "        os.kill(0, sig); os.killpg(os.getpgid(0), sig)\n"
        "print('survived')"
    ),
    "interrupt_terminate_hangup_pid_1": sh("kill -INT 1; kill -TERM 1; kill -HUP 1; kill -USR1 1; kill -PIPE 1; echo ok"),
    "stop_then_kill_the_parent": py("import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nos.kill(os.getppid(), signal.SIGKILL)"),
    "sigkill_and_sigstop_to_everyone": sh("kill -STOP -1; kill -KILL -1; echo alive"),
    "signals_through_pidfds": py(
        VISIBLE_PIDS + "import signal\nfor pid in pids:\n    try:\n        fd = os.pidfd_open(pid)\n"
        "        signal.pidfd_send_signal(fd, signal.SIGKILL)\n    except OSError: pass"
    ),
    "prlimit_every_visible_pid": py(
        "import os, resource\n" + VISIBLE_PIDS + "tiny = {'RLIMIT_NOFILE': 3, 'RLIMIT_AS': 1 << 20, 'RLIMIT_NPROC': 0,"
        " 'RLIMIT_CPU': 0, 'RLIMIT_FSIZE': 0, 'RLIMIT_STACK': 4096, 'RLIMIT_DATA': 0, 'RLIMIT_MEMLOCK': 0,"
        " 'RLIMIT_SIGPENDING': 0, 'RLIMIT_MSGQUEUE': 0}\n"
        "for pid in pids:\n    for name, value in tiny.items():\n"
        "        try: resource.prlimit(pid, getattr(resource, name), (value, value))\n        except OSError: pass"
    ),
    "renice_taskset_ionice_every_visible_pid": sh(
        "for p in $(ls /proc | grep '^[0-9]'); do renice -n 19 -p $p; taskset -p 1 $p; ionice -c 3 -p $p;"
        " chrt -i -p 0 $p; done >/dev/null 2>&1; renice -n 19 -u 1000; ionice -c 3 -u 1000; echo done"
    ),
    "ptrace_and_proc_files_of_pid_1": py(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.ptrace(16, 1, 0, 0))\n"
        "for path, mode in (('/proc/1/mem', os.O_RDWR), ('/proc/1/oom_score_adj', os.O_WRONLY),"
        " ('/proc/1/fd/1', os.O_WRONLY), ('/proc/1/environ', os.O_RDONLY)):\n"
        "    try: os.write(os.open(path, mode), b'-1000')\n    except OSError as exc: print(path, exc.errno)"
    ),
    "close_fds_0_1_2": sh("exec 0<&- 1>&- 2>&-; sleep 0.2; exit 3"),
    "replace_fds_0_1_2": sh("exec 0</dev/null 1>/dev/null 2>&1; echo hidden; exit 4"),
    "fake_reply_frames_and_garbage": py(
        "import json, os, struct\nframe = json.dumps({'error': 'fake', 'stdout_len': 0, 'stderr_len': 0}).encode()\n"
        "for fd in (1, 2):\n    os.write(fd, struct.pack('>I', len(frame)) + frame)\n"
        "    os.write(fd, bytes(range(256)) * 4096)\n    os.write(fd, b'\\xff' * 70000 + b'\\n' * 10)"
    ),
    "fill_dev_shm": sh("cat /dev/zero > /dev/shm/fill; df /dev/shm; echo filled"),
    "fill_tmp_and_workspace": sh("cat /dev/zero > /tmp/fill; cat /dev/zero > /workspace/fill; echo filled"),
    "many_inodes_in_dev_shm": sh("cd /dev/shm && i=0; while [ $i -lt 3000 ]; do : > f$i; i=$((i+1)); done; echo ok"),
    "memory_bomb_with_lowered_oom_score": py(
        "for value in ('-1000', '-1', '0'):\n"
        "    try: open('/proc/self/oom_score_adj', 'w').write(value)\n    except OSError: pass\n"
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))"
    ),
    "memory_bomb_in_many_small_processes": py(
        "import os, time\nopen('/proc/self/oom_score_adj', 'w').write('0')\n"
        "for _ in range(48):\n    if os.fork() == 0:\n        data = bytearray(9 << 20)\n"
        "        for i in range(0, len(data), 4096): data[i] = 1\n        time.sleep(30)\n"
        "        os._exit(0)\ntime.sleep(30)"
    ),
    "memory_bomb_plus_full_dev_shm": sh(
        "head -c 200000000 /dev/zero > /dev/shm/x; echo 0 > /proc/self/oom_score_adj;"
        " python3 -c 'b = [bytearray(8 << 20) for _ in range(100)]'"
    ),
    "fork_bomb": py(
        "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.05)"
    ),
    "exhaust_fds_and_pipes": py(
        "import os\nfds = []\ntry:\n    while True: fds.extend(os.pipe())\nexcept OSError: pass\n"
        "try:\n    while True: fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError: pass\nprint(len(fds))"
    ),
    "exhaust_inotify_and_mqueues": py(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nn = m = 0\n"
        "while libc.inotify_init() >= 0: n += 1\n"
        "while libc.mq_open(('/q%d' % m).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0: m += 1\nprint(n, m)"
    ),
    "stop_itself": sh("kill -STOP $$; echo never"),
    "daemon_keeping_the_output_pipes": sh("setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done' & echo started"),
    "setpgid_and_session_games": py(
        VISIBLE_PIDS + "for pid in pids:\n    try: os.setpgid(pid, os.getpid())\n    except OSError: pass\n"
        "os.setsid() if os.getsid(0) != os.getpid() else None\nprint('done')"
    ),
    "proc_and_sys_writes": sh(
        "echo b > /proc/sysrq-trigger; echo 1 > /proc/sys/kernel/panic; echo 0 > /proc/sys/user/max_user_namespaces;"
        " hostname evil; echo done"
    ),
}
NEXT_OUTPUT = f"in next 100 {os.getpriority(os.PRIO_PROCESS, 0)} {sorted(os.sched_getaffinity(0))}\n".encode()
"""What `NEXT_RUN` prints in a new sandbox (nice and affinity are this process's, as the sandbox's)."""
SLOW = {"stop_itself", "fork_bomb", "memory_bomb_in_many_small_processes"}


def _attack_then_next(argv: list[str]) -> tuple[Any, Any, Any]:
    async def go() -> tuple[Any, Any, Any]:
        async with SandboxPool(spec(timeout_s=10.0), size=1) as pool:
            attack = await pool.run(argv, timeout_s=3.0 if argv in [ATTACKS[n] for n in SLOW] else None)
            await asyncio.sleep(0.05)
            after = await pool.run(py(NEXT_RUN), stdin=b"in")
            return attack, after, pool.stats

    return run(go())


@pytest.mark.parametrize("name", list(ATTACKS))
def test_no_program_can_produce_a_sandbox_error_or_break_its_slot(name: str) -> None:
    attack, after, stats = _attack_then_next(ATTACKS[name])
    assert attack.status in MODEL_STATUSES, (attack.status, attack.error, attack.stderr[-500:])
    assert after.status == "ok" and after.stdout == NEXT_OUTPUT, (after.status, after.error, after.stderr)
    assert stats.infra_errors == 0


def test_memory_bombs_are_memory_limit() -> None:
    if host_features().cgroups is None:
        pytest.skip("no cgroups: memory is limited by rlimits only")
    for name in ("memory_bomb_with_lowered_oom_score", "memory_bomb_in_many_small_processes"):
        attack, _after, _stats = _attack_then_next(ATTACKS[name])
        assert attack.status == "memory_limit", (name, attack.status, attack.error)


def test_an_error_with_an_oom_kill_during_the_run_is_memory_limit_else_sandbox_error() -> None:
    reply = {"error": "sandbox supervisor failed: supervisor exited"}
    assert classify(reply, spec(), oom_kills=1).status == "memory_limit"
    assert classify(reply, spec(), oom_kills=0).status == "sandbox_error"


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return int(next(line.split()[1] for line in handle if line.startswith("PPid:")))


def test_a_supervisor_lost_in_a_run_with_an_oom_kill_is_memory_limit_and_the_slot_is_replaced() -> None:
    """The program cannot get the supervisor chosen by the OOM killer (each run's init outranks it);
    this stands in for whatever could: a run's child is OOM-killed, then the supervisor dies (killed
    from the host here). The result must still be the model's `memory_limit`, and the slot replaced."""
    if host_features().cgroups is None:
        pytest.skip("needs a memory cgroup")
    bomb = "import os, time\nif os.fork() == 0:\n    chunks = []\n    while True: chunks.append(bytearray(16 << 20))\ntime.sleep(20)"

    async def go() -> tuple[Any, Any, Any]:
        async with SandboxPool(spec(), size=1) as pool:
            async with pool.acquire() as sandbox:
                cgroup = sandbox.ctx.cgroup
                assert cgroup is not None
                supervisor = _supervisor_pid(cgroup.pids())
                before = cgroup.oom_kills()
                task = asyncio.ensure_future(sandbox.exec(py(bomb)))
                while cgroup.oom_kills() == before and not task.done():
                    await asyncio.sleep(0.01)
                os.kill(supervisor, signal.SIGKILL)
                result = await task
            await asyncio.sleep(0.05)
            after = await pool.run(py(NEXT_RUN), stdin=b"in")
            return result, after, pool.stats

    result, after, stats = run(go())
    assert result.status == "memory_limit" and "sandbox was killed" in result.error, (result.status, result.error)
    assert stats.replaced == 1 and after.status == "ok" and after.stdout == NEXT_OUTPUT


def _supervisor_pid(pids: list[int]) -> int:
    return next(
        pid for pid in pids if SUPERVISOR_MOUNT.encode() in _cmdline(pid) and b"bwrap" in _cmdline(_parent(pid))
    )


def test_the_supervisor_survives_termination_and_job_control_signals() -> None:
    """None can reach it from a run any more; from anywhere else they must not end it either."""
    if host_features().cgroups is None:
        pytest.skip("finds the supervisor through the sandbox's cgroup")

    async def go() -> list[Any]:
        async with SandboxPool(spec(), size=1) as pool, pool.acquire() as sandbox:
            assert sandbox.ctx.cgroup is not None
            supervisor = _supervisor_pid(sandbox.ctx.cgroup.pids())
            results = []
            for sig in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTSTP"):
                os.kill(supervisor, getattr(signal, sig))
                results.append(await sandbox.exec(["echo", sig]))
            return results

    for result in run(go()):
        assert result.status == "ok", (result.status, result.error)
