"""Process and kernel-interface isolation: syscalls the seccomp filter denies, signals, reaping."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess

from posttrain.sandbox import Sandbox, run_sync
from posttrain.sandbox.host import host_features

from .helpers import PY, proc_state, py, requires_bwrap, requires_root, run, run_leftovers, sh, spec

pytestmark = requires_bwrap

LIBC = "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def test_ptrace_is_denied() -> None:
    result = py(LIBC + "print(libc.ptrace(0, 0, 0, 0), ctypes.get_errno())")  # PTRACE_TRACEME
    assert result.stdout.split() == [b"-1", b"1"]  # EPERM


def test_process_vm_readv_is_denied() -> None:
    code = LIBC + "import os\nprint(libc.process_vm_readv(os.getppid(), 0, 0, 0, 0, 0), ctypes.get_errno())"
    result = py(code)
    assert result.stdout.split() == [b"-1", b"1"]


def test_tiocsti_is_denied() -> None:
    # stdin is a pipe, so without the filter this would be ENOTTY (25); the filter answers EPERM first.
    code = LIBC + "c = ctypes.c_char(b'x')\nprint(libc.ioctl(0, 0x5412, ctypes.byref(c)), ctypes.get_errno())"
    result = py(code)
    assert result.stdout.split() == [b"-1", b"1"]


def test_setuid_binaries_do_not_grant_privileges() -> None:
    result = sh("grep NoNewPrivs /proc/self/status; su -c id root </dev/null 2>&1; id -u")
    assert b"NoNewPrivs:\t1" in result.stdout and result.stdout.strip().endswith(b"1000")


def test_mount_is_denied() -> None:
    result = py(LIBC + "print(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())")
    assert result.stdout.split() == [b"-1", b"1"]


def test_new_user_namespace_is_denied() -> None:
    result = sh("unshare --user --map-root-user true")
    assert result.status == "runtime_error"


def test_bpf_and_keyctl_are_denied() -> None:
    # x86_64 numbers: bpf 321, keyctl 250; the filter answers EPERM for both.
    if host_features().bwrap is None or os.uname().machine != "x86_64":
        return
    result = py(
        LIBC
        + "print(libc.syscall(321, 0, 0, 0), ctypes.get_errno(), libc.syscall(250, 0, 0), ctypes.get_errno())"
    )
    assert result.stdout.split() == [b"-1", b"1", b"-1", b"1"]


def test_kill_minus_one_inside_leaves_host_processes_alive() -> None:
    async def go() -> tuple[str, bool]:
        async with Sandbox.create(spec()) as sb:
            uid = sb.ctx.host_uid  # a host process of the very uid this sandbox runs as, when there is one
            kwargs = {"user": uid, "group": uid} if uid is not None else {}
            victim = subprocess.Popen(["sleep", "30"], **kwargs)
            try:
                result = await sb.exec(["/bin/sh", "-c", "kill -9 -1; sleep 0.2; echo survived"])
                return result.status, victim.poll() is None
            finally:
                victim.kill()
                victim.wait()

    status, alive = run(go())
    assert alive and status != "sandbox_error"


def test_killing_pid_1_from_inside_does_not_kill_the_supervisor() -> None:
    async def go() -> tuple[str, bytes]:
        async with Sandbox.create(spec()) as sb:
            first = await sb.exec(["/bin/sh", "-c", "kill -9 1; kill -9 -1"])
            second = await sb.exec(["echo", "still here"])
            return first.status, second.stdout

    status, out = run(go())
    assert status != "sandbox_error" and out == b"still here\n"


def test_supervisor_killed_from_host_gives_sandbox_error_not_program_error() -> None:
    async def go() -> str:
        async with Sandbox.create(spec()) as sb:
            assert sb.session is not None and sb.session.proc is not None
            os.killpg(sb.session.proc.pid, signal.SIGKILL)
            return (await sb.exec(["true"])).status

    assert run(go()) == "sandbox_error"


def test_orphans_and_zombies_are_reaped_and_cgroup_is_empty_after_run() -> None:
    script = "sleep 100 & (sleep 100 &) ; python3 -c 'import os\nif os.fork(): os._exit(0)\nimport time; time.sleep(100)' & echo started"

    async def go() -> tuple[list[int], list[int]]:
        async with Sandbox.create(spec()) as sb:
            assert sb.ctx.cgroup is not None
            before = sb.ctx.cgroup.pids()
            await sb.exec(["/bin/sh", "-c", script])
            return before, sb.ctx.cgroup.pids()

    if host_features().cgroups is None:
        return
    before, after = run(go())
    assert set(before) <= set(after) and run_leftovers(before, after) == []  # supervisor and bwrap remain


def test_a_run_after_the_prepared_child_was_killed_still_runs() -> None:
    async def go() -> tuple[int, bytes]:
        async with Sandbox.create(spec()) as sb:
            assert sb.ctx.cgroup is not None
            before = sb.ctx.cgroup.pids()
            await sb.exec(["true"])
            await asyncio.sleep(0.2)  # the supervisor forks the next child after its reply
            prepared = [p for p in sb.ctx.cgroup.pids() if p not in before]  # the run's init and its shell
            for pid in prepared:
                with contextlib.suppress(ProcessLookupError):  # the shell dies with its namespace's init
                    os.kill(pid, signal.SIGKILL)
                while proc_state(pid) not in ("Z", "gone"):  # dead (a zombie until the supervisor reaps it)
                    await asyncio.sleep(0.01)
            return len(prepared), (await sb.exec(["echo", "fine"])).stdout

    if host_features().cgroups is None:
        return
    assert run(go()) == (2, b"fine\n")


def test_a_one_shot_program_gets_no_fd_the_host_process_inherited() -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # as a descriptor left open by whatever started the trainer
    try:
        result = run_sync([PY, "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))"], spec())
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.stdout == b"['0', '1', '2', '3']\n"  # 3 is the listing's own


def test_one_shot_run_leaves_an_empty_cgroup() -> None:
    async def go() -> list[int]:
        async with Sandbox.create(spec(), persistent=False) as sb:
            assert sb.ctx.cgroup is not None
            await sb.exec(["/bin/sh", "-c", "sleep 100 & sleep 100 & echo x"])
            return sb.ctx.cgroup.pids()

    if host_features().cgroups is None:
        return
    assert run(go()) == []


def test_an_exec_environment_reaches_the_program_in_both_modes() -> None:
    async def go(persistent: bool) -> bytes:
        async with Sandbox.create(spec(), persistent=persistent) as sb:
            return (await sb.exec(["/bin/sh", "-c", 'echo "$GREETING"'], env={"GREETING": "hi there"})).stdout

    assert run(go(True)) == run(go(False)) == b"hi there\n"


def test_sandbox_cannot_see_host_processes() -> None:
    result = sh("ls /proc | grep -c '^[0-9]'")
    assert int(result.stdout) <= 4  # supervisor, sh, ls and grep


def test_two_sandboxes_can_serve_on_the_same_loopback_port() -> None:
    server = (
        "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 8765))\ns.listen()\n"
        "c = socket.create_connection(('127.0.0.1', 8765))\ntime.sleep(0.5)\nprint('served')\n"
    )

    async def go() -> list[bytes]:
        async with (
            Sandbox.create(spec(network="loopback")) as a,
            Sandbox.create(spec(network="loopback")) as b,
        ):
            results = await asyncio.gather(a.exec([PY, "-c", server]), b.exec([PY, "-c", server]))
            return [r.stdout for r in results]

    assert run(go()) == [b"served\n", b"served\n"]


def test_network_none_denies_internet_sockets() -> None:
    result = py("import socket\ntry:\n    socket.socket()\nexcept OSError as e:\n    print(e.errno)")
    assert result.stdout == b"1\n"


def _host_listener() -> tuple[object, int]:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener, listener.getsockname()[1]


def test_host_loopback_listener_is_unreachable_with_network_none() -> None:
    listener, port = _host_listener()
    try:
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1); print('connected')\nexcept OSError as e:\n    print('blocked', e.errno)"
        assert py(code).stdout.startswith(b"blocked")
    finally:
        listener.close()  # type: ignore[attr-defined]


def test_host_loopback_listener_is_unreachable_with_network_loopback() -> None:
    listener, port = _host_listener()
    try:
        code = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1); print('connected')\nexcept OSError as e:\n    print('blocked', e.errno)"
        assert py(code, network="loopback").stdout == b"blocked 111\n"  # ECONNREFUSED: a private loopback
    finally:
        listener.close()  # type: ignore[attr-defined]


@requires_root
def test_listener_in_a_test_network_namespace_is_unreachable() -> None:
    """A veth pair to a namespace created here; the host reaches it, the sandbox must not."""
    ns, host_ip, ns_ip = f"ptsb{os.getpid()}", "10.231.7.1", "10.231.7.2"
    setup = [f"ip netns add {ns}", f"ip link add {ns}h type veth peer name {ns}n",
             f"ip link set {ns}n netns {ns}", f"ip addr add {host_ip}/30 dev {ns}h", f"ip link set {ns}h up",
             f"ip -n {ns} addr add {ns_ip}/30 dev {ns}n", f"ip -n {ns} link set {ns}n up",
             f"ip -n {ns} link set lo up"]  # fmt: skip
    try:
        for command in setup:
            subprocess.run(command.split(), check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        return  # no netns support on this host: nothing to test against
    server = subprocess.Popen(["ip", "netns", "exec", ns, PY_HOST, "-c",
                               f"import socket\ns=socket.socket()\ns.bind(('{ns_ip}', 9))\ns.listen()\nimport time\ntime.sleep(20)"])  # fmt: skip
    try:
        probe = f"import socket, time\nfor _ in range(50):\n    try:\n        socket.create_connection(('{ns_ip}', 9), timeout=1); print('connected'); break\n    except OSError as e:\n        err = e.errno; time.sleep(0.05)\nelse:\n    print('blocked', err)"
        control = subprocess.run([PY_HOST, "-c", probe], capture_output=True, timeout=10)
        assert control.stdout == b"connected\n"  # the target really is reachable from the host
        result = py(probe.replace("range(50)", "range(1)"), network="loopback", timeout_s=10)
        assert result.stdout.startswith(b"blocked")
    finally:
        server.kill()
        server.wait()
        subprocess.run(["ip", "link", "del", f"{ns}h"], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


PY_HOST = os.path.realpath("/usr/bin/python3") if os.path.exists("/usr/bin/python3") else "python3"


def test_all_capabilities_are_dropped() -> None:
    result = sh("grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status")
    values = [line.split()[1] for line in result.stdout.decode().splitlines()]
    assert len(values) == 4 and set(values) == {"0000000000000000"}


def _sandbox_uid_processes(owner: int, argv0: bytes = b"") -> int:
    """Processes running as the sandbox uid in cgroups of the host process `owner` (others may run
    sandboxes too), only those whose argv[0] is `argv0` when given."""
    from pathlib import Path

    uids = host_features().uid_slots
    marker = f"posttrain-sandbox-{owner}/"
    count = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            line = next(x for x in (proc / "status").read_text().splitlines() if x.startswith("Uid:"))
            cgroups = (proc / "cgroup").read_text()
            name = (proc / "cmdline").read_bytes().split(b"\0")[0]
        except (OSError, StopIteration):
            continue
        in_range = uids is not None and int(line.split()[1]) in uids.uids
        count += in_range and marker in cgroups and argv0 in (b"", name)
    return count


@requires_root
def test_sandbox_dies_with_the_host_process() -> None:
    import sys
    import time

    from posttrain.sandbox.workspace import state_base, sweep_stale

    if host_features().run_as_uid is None or host_features().cgroups is None:
        return  # processes are told apart by their cgroup
    script = "from posttrain.sandbox import run_sync, SandboxSpec\nrun_sync(['sleep', '60'], SandboxSpec(timeout_s=120))"
    host = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 20
    # Wait for the program itself: bwrap arms die-with-parent during its start-up.
    while _sandbox_uid_processes(host.pid, b"sleep") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandbox_uid_processes(host.pid, b"sleep") > 0  # the sandboxed sleep is running
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while _sandbox_uid_processes(host.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sandbox_uid_processes(host.pid) == 0  # --die-with-parent took the whole sandbox down
    sweep_stale(state_base())  # the killed process's tmpfs; its cgroup is swept by the next process start
