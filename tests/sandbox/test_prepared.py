"""The supervisor's prepared child: a run it takes must look, from inside, exactly like a forked run."""

from __future__ import annotations

import asyncio
import io
import json
import struct

from posttrain.sandbox import Sandbox, run_sync
from posttrain.sandbox.supervisor import WAITER_ARGV, read_frame

from .helpers import PY, requires_bwrap, run, spec

PROBE = """
import json, os, resource, signal, sys
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
print(json.dumps({
    "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "fds": sorted(os.listdir("/proc/self/fd")),
    "leader": os.getsid(0) == os.getpid() == os.getpgid(0),
    "limits": [resource.getrlimit(getattr(resource, n)) for n in ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")],
    "oom": open("/proc/self/oom_score_adj").read().strip(),
    "status": {k: status[k].strip() for k in ("NoNewPrivs", "Seccomp", "SigIgn", "SigBlk", "CapEff", "Uid")},
    "sigpipe": signal.getsignal(signal.SIGPIPE) == signal.SIG_DFL,
    "syscalls": syscalls(),
}, sort_keys=True))
"""
SYSCALLS = """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"clone3": 435, "io_uring_setup": 425, "bpf": 321, "open_tree": 428, "setns": 308,
                 "pidfd_getfd": 438, "mount_setattr": 442},
      "aarch64": {"clone3": 435, "io_uring_setup": 425, "bpf": 280, "open_tree": 428, "setns": 268,
                  "pidfd_getfd": 438, "mount_setattr": 442}}[os.uname().machine]

def outcome(result):
    return [result, ctypes.get_errno() if result == -1 else 0]

def syscalls():
    seen = {name: outcome(libc.syscall(number, 0, 0, 0, 0, 0)) for name, number in sorted(NR.items())}
    seen["unshare_user"] = outcome(libc.unshare(0x10000000))
    seen["unshare_net"] = outcome(libc.unshare(0x40000000))
    seen["mount"] = outcome(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
    seen["ptrace_traceme"] = outcome(libc.ptrace(0, 0, 0, 0))
    seen["tiocsti"] = outcome(libc.ioctl(0, 0x5412, ctypes.byref(ctypes.c_char(b"x"))))
    seen["keyctl"] = outcome(libc.syscall({"x86_64": 250, "aarch64": 219}[os.uname().machine], 0, 0, 0, 0, 0))
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX, socket.AF_NETLINK):
        try:
            socket.socket(family, socket.SOCK_DGRAM).close()
            seen[f"socket_{family}"] = 0
        except OSError as exc:
            seen[f"socket_{family}"] = exc.errno
    return seen
"""
PROBE = SYSCALLS + PROBE


async def _waiter_ready(sb: Sandbox) -> bool:
    """Wait until the supervisor's next prepared child sits in its shell (so the next run uses it)."""
    assert sb.ctx.cgroup is not None
    expected = "\0".join(WAITER_ARGV).encode() + b"\0"
    for _ in range(200):
        for pid in sb.ctx.cgroup.pids():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    if handle.read() == expected:
                        return True
            except OSError:
                continue
        await asyncio.sleep(0.01)
    return False


def _forked_then_prepared(argv: list[str], env: dict[str, str] | None = None, stdin: bytes = b"") -> list:
    """Run `argv` twice in one sandbox: the first run is forked, the second goes through the waiter."""

    async def go() -> list:
        async with Sandbox.create(spec()) as sb:
            first = await sb.exec(argv, stdin, env=env)
            used_waiter = await _waiter_ready(sb)
            second = await sb.exec(argv, stdin, env=env)
            return [first, second, used_waiter]

    return run(go())


@requires_bwrap
def test_a_run_through_the_waiting_shell_sees_what_a_forked_run_sees() -> None:
    first, second, used_waiter = _forked_then_prepared(
        [PY, "-c", PROBE], env={"QUOTED": 'it\'s "odd"\n$HOME'}
    )
    assert used_waiter
    assert first.status == second.status == "ok", (first.stderr, second.stderr)
    seen_first, seen_second = json.loads(first.stdout), json.loads(second.stdout)
    assert seen_first == seen_second
    assert "PWD" not in seen_second["env"] and seen_second["env"]["QUOTED"] == 'it\'s "odd"\n$HOME'
    assert seen_second["argv"] == ["-c"] and seen_second["leader"] and seen_second["oom"] == "1000"
    assert seen_second["status"]["NoNewPrivs"] == "1" and seen_second["status"]["Seccomp"] == "2"


@requires_bwrap
def test_a_persistent_run_gets_the_seccomp_policy_bwrap_gives_a_one_shot_run() -> None:
    """The supervisor loads the filter itself in each run's process (bwrap's would forbid the run's
    namespaces); what the program can and cannot call must be exactly what a one-shot run, whose
    filter bwrap loads, gets."""
    _first, second, used_waiter = _forked_then_prepared([PY, "-c", PROBE])
    oneshot = run_sync([PY, "-c", PROBE], spec())
    assert used_waiter and second.status == oneshot.status == "ok", (second.stderr, oneshot.stderr)
    persistent, alone = json.loads(second.stdout), json.loads(oneshot.stdout)
    assert persistent["syscalls"] == alone["syscalls"]
    assert persistent["status"]["NoNewPrivs"] == alone["status"]["NoNewPrivs"] == "1"
    assert persistent["status"]["CapEff"] == alone["status"]["CapEff"] == "0000000000000000"
    assert persistent["syscalls"]["clone3"] == [-1, 38] and persistent["syscalls"]["unshare_user"] == [-1, 1]


@requires_bwrap
def test_argv0_and_stdin_reach_the_program_unchanged() -> None:
    first, second, used_waiter = _forked_then_prepared(["sh", "-c", 'echo "$0"; cat'], stdin=b"from stdin")
    assert used_waiter
    assert first.stdout == second.stdout == b"sh\nfrom stdin"


@requires_bwrap
def test_an_environment_name_the_shell_cannot_export_is_still_passed_exactly() -> None:
    first, second, _ = _forked_then_prepared(["env"], env={"dotted.name": "1", "dash-name": "2"})
    for result in (first, second):
        assert b"dotted.name=1\n" in result.stdout and b"dash-name=2\n" in result.stdout


@requires_bwrap
def test_an_executable_without_a_shebang_fails_as_execve_fails_not_as_a_shell_script() -> None:
    async def go() -> list:
        async with Sandbox.create(spec()) as sb:
            await sb.write_file("script", b"echo ran as a shell script\n", mode=0o755)
            first = await sb.exec(["./script"])
            assert await _waiter_ready(sb)
            return [first, await sb.exec(["./script"])]

    for result in run(go()):
        assert result.status == "runtime_error" and result.exit_code == 126
        assert b"ran as a shell script" not in result.stdout


@requires_bwrap
def test_a_fifo_named_as_the_program_does_not_block_the_supervisor() -> None:
    async def go() -> list:
        async with Sandbox.create(spec(timeout_s=5.0)) as sb:
            await sb.exec(["sh", "-c", "mkfifo prog && chmod +x prog"])
            assert await _waiter_ready(sb)
            blocked = await sb.exec(["./prog"])
            return [blocked, await sb.exec(["echo", "still answering"])]

    blocked, after = run(go())
    assert blocked.status == "runtime_error" and blocked.status != "sandbox_error"
    assert after.stdout == b"still answering\n"


def test_a_request_cut_short_in_its_stdin_is_no_request() -> None:
    header = json.dumps({"argv": ["true"], "stdin_len": 10}).encode()
    whole = struct.pack(">I", len(header)) + header + b"0123456789"
    assert read_frame(io.BytesIO(whole)) == ({"argv": ["true"], "stdin_len": 10}, b"0123456789")
    assert read_frame(io.BytesIO(whole[:-3])) is None
    assert read_frame(io.BytesIO(b"")) is None
