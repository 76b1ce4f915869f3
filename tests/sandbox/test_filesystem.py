"""Filesystem isolation: what sandboxed code can read and write, and what the host side will follow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from posttrain.sandbox import Sandbox
from posttrain.sandbox.workspace import WorkspaceError

from .helpers import py, requires_bwrap, run, sh, spec

pytestmark = requires_bwrap


@pytest.mark.parametrize(
    "target", ["/etc/posttrain-x", "/usr/bin/posttrain-x", "/posttrain-x", "/proc/posttrain-x"]
)
def test_writing_outside_the_workspace_fails(target: str) -> None:
    result = sh(f"echo x > {target}")
    assert result.status == "runtime_error"


def test_system_dirs_are_read_only_even_for_existing_files() -> None:
    result = sh("echo x >> /etc/hostname || echo x >> /usr/bin/env")
    assert result.status == "runtime_error"


def test_etc_shadow_is_not_readable() -> None:
    result = sh("cat /etc/shadow")
    assert b"root:" not in result.stdout


def test_host_home_is_not_visible() -> None:
    home = os.path.expanduser("~")
    result = py(f"import os\nprint(sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else 'absent')")
    assert result.stdout.strip() == b"absent" or b".bashrc" not in result.stdout


def test_project_checkout_is_not_visible() -> None:
    checkout = str(Path(__file__).resolve().parents[2])
    result = py(f"import os\nprint(os.path.exists({checkout!r} + '/pyproject.toml'))")
    assert result.stdout.strip() == b"False"


def test_proc_1_root_does_not_lead_to_the_host() -> None:
    result = sh("ls /proc/1/root/ 2>&1; cat /proc/1/root/etc/shadow 2>&1")
    assert b"root:" not in result.stdout and b"work" not in result.stdout.split(b"\n")[0]


def test_proc_1_environ_is_not_readable() -> None:
    result = sh("cat /proc/1/environ")
    assert result.status == "runtime_error" and result.stdout == b""


def test_host_environment_secret_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSTTRAIN_TEST_SECRET", "hunter2-secret")
    result = sh("env; cat /proc/*/environ 2>/dev/null")
    assert b"hunter2-secret" not in result.stdout


def test_allowlisted_environment_is_passed() -> None:
    result = sh('echo "$GREETING"', env={"GREETING": "hello"})
    assert result.stdout == b"hello\n"


def test_another_sandboxes_files_are_invisible() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec()) as a, Sandbox.create(spec()) as b:
            await a.exec(["/bin/sh", "-c", "echo topsecret > secret.txt"])
            found = await b.exec(
                ["/bin/sh", "-c", "grep -rs topsecret /workspace /tmp /proc/1/cwd; ls /workspace"]
            )
            return found.stdout

    assert b"topsecret" not in run(go())


def test_host_read_does_not_follow_a_symlink_swapped_in_for_output(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("host-only")

    async def go() -> None:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["ln", "-sf", str(secret), "out.txt"])
            with pytest.raises(WorkspaceError):
                await sb.read_file("out.txt")

    run(go())


def test_host_read_does_not_follow_a_symlinked_directory(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("host-only")

    async def go() -> None:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["ln", "-s", str(tmp_path), "results"])
            with pytest.raises(WorkspaceError):
                await sb.read_file("results/out.txt")

    run(go())


def test_host_write_replaces_a_planted_symlink_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched")

    async def go() -> None:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["ln", "-s", str(victim), "main.py"])
            await sb.write_file("main.py", b"print(1)")

    run(go())
    assert victim.read_text() == "untouched"


def test_host_read_refuses_a_fifo() -> None:
    async def go() -> None:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["mkfifo", "out.txt"])
            with pytest.raises(WorkspaceError):
                await sb.read_file("out.txt")

    run(go())


def test_dev_urandom_works() -> None:
    result = py("import os\nprint(len(open('/dev/urandom', 'rb').read(16)))")
    assert result.stdout == b"16\n"


def test_no_block_devices_are_visible() -> None:
    code = "import os, stat\nprint([n for n in os.listdir('/dev') if stat.S_ISBLK(os.lstat('/dev/' + n).st_mode)])"
    result = py(code)
    assert result.stdout == b"[]\n"


def test_writes_to_proc_sys_fail() -> None:
    result = sh("echo 1 > /proc/sys/kernel/sysrq || echo 1 > /proc/sys/vm/drop_caches")
    assert result.status == "runtime_error"
