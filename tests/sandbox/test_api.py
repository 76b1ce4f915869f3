"""The public API: exec results, files, snapshots and forks, pools, run_sync, the local backend."""

from __future__ import annotations

import asyncio
import warnings

import pytest

from posttrain.sandbox import (
    ExecResult,
    Sandbox,
    SandboxPool,
    SandboxSpec,
    SandboxUnavailable,
    run_sync,
)

from .helpers import PY, proc_state, requires_bwrap, run, spec


@requires_bwrap
def test_exec_returns_output_and_exit_code() -> None:
    async def go() -> ExecResult:
        async with Sandbox.create(spec()) as sb:
            return await sb.exec(
                [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]
            )

    result = run(go())
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        "runtime_error",
        3,
        b"out\n",
        b"err\n",
    )


@requires_bwrap
def test_missing_program_is_the_programs_failure_not_infra() -> None:
    async def go() -> ExecResult:
        async with Sandbox.create(spec()) as sb:
            return await sb.exec(["no-such-program-xyz"])

    result = run(go())
    assert result.status == "runtime_error" and result.exit_code == 127


@requires_bwrap
def test_files_written_by_host_are_seen_by_program_and_back() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec(files={"data/in.txt": "21"})) as sb:
            await sb.write_file(
                "main.py", b"print(int(open('data/in.txt').read()) * 2, file=open('out.txt', 'w'))"
            )
            await sb.exec([PY, "main.py"])
            return await sb.read_file("out.txt")

    assert run(go()) == b"42\n"


@requires_bwrap
def test_restore_brings_back_the_snapshot_state() -> None:
    async def go() -> tuple[bytes, bool]:
        async with Sandbox.create(spec()) as sb:
            await sb.write_file("a.txt", b"before")
            snap = await sb.snapshot()
            await sb.exec(["/bin/sh", "-c", "echo after > a.txt; echo new > b.txt"])
            await sb.restore(snap)
            listing = await sb.exec(["ls"])
            return await sb.read_file("a.txt"), b"b.txt" in listing.stdout

    assert run(go()) == (b"before", False)


@requires_bwrap
def test_fork_starts_from_the_snapshot_and_diverges_independently() -> None:
    async def go() -> tuple[bytes, bytes]:
        async with Sandbox.create(spec()) as sb:
            await sb.write_file("state.txt", b"shared")
            snap = await sb.snapshot()
            child = await sb.fork(snap)
            try:
                await child.exec(["/bin/sh", "-c", "echo child > state.txt"])
                return await sb.read_file("state.txt"), await child.read_file("state.txt")
            finally:
                await child.close()

    assert run(go()) == (b"shared", b"child\n")


@requires_bwrap
def test_snapshot_keeps_symlinks_as_links() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["ln", "-s", "/etc/hostname", "link"])
            snap = await sb.snapshot()
            await sb.restore(snap)
            return (await sb.exec(["readlink", "link"])).stdout

    assert run(go()) == b"/etc/hostname\n"


@requires_bwrap
def test_setup_commands_run_once_at_creation() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec(setup=(("/bin/sh", "-c", "echo ready > setup.txt"),))) as sb:
            return await sb.read_file("setup.txt")

    assert run(go()) == b"ready\n"


@requires_bwrap
def test_pool_serves_many_concurrent_callers_without_dropping_any() -> None:
    async def go() -> list[ExecResult]:
        async with SandboxPool(spec(), size=2) as pool:
            calls = [pool.run(["/bin/sh", "-c", f"echo {i}"]) for i in range(12)]
            return await asyncio.gather(*calls)

    results = run(go())
    assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(12)]


@requires_bwrap
def test_pool_recycle_clears_the_workspace_between_runs() -> None:
    async def go() -> bytes:
        async with SandboxPool(spec(), size=1) as pool:
            await pool.run(["/bin/sh", "-c", "echo leftover > junk.txt"], files={"x.txt": b"1"})
            return (await pool.run(["ls", "-A"])).stdout

    assert run(go()) == b""


@requires_bwrap
def test_pool_never_runs_more_than_its_size_at_once() -> None:
    async def go() -> int:
        peak = 0
        async with SandboxPool(spec(), size=2) as pool:

            async def one() -> None:
                nonlocal peak
                async with pool.acquire() as sb:
                    peak = max(peak, 2 - pool._idle.qsize())
                    await sb.exec(["sleep", "0.05"])

            await asyncio.gather(*(one() for _ in range(6)))
        return peak

    assert run(go()) == 2


@requires_bwrap
def test_pool_replaces_a_sandbox_whose_supervisor_died() -> None:
    async def go() -> tuple[str, str, int]:
        import os
        import signal

        async with SandboxPool(spec(), size=1) as pool:
            async with pool.acquire() as sb:
                assert sb.session is not None and sb.session.proc is not None
                os.killpg(sb.session.proc.pid, signal.SIGKILL)
                # The kill lands asynchronously; once bwrap is a zombie its exit has SIGKILLed the
                # supervisor (die-with-parent), which can then answer nothing.
                while proc_state(sb.session.proc.pid) != "Z":
                    await asyncio.sleep(0.005)
                first = await sb.exec(["true"])
            second = await pool.run(["true"])
            return first.status, second.status, pool.stats.replaced

    assert run(go()) == ("sandbox_error", "ok", 1)


@requires_bwrap
def test_pool_passes_files_and_stdin() -> None:
    async def go() -> bytes:
        async with SandboxPool(spec(), size=1) as pool:
            return (
                await pool.run([PY, "main.py"], files={"main.py": "print(input()[::-1])"}, stdin=b"abc\n")
            ).stdout

    assert run(go()) == b"cba\n"


@requires_bwrap
def test_a_reused_workspace_starts_empty() -> None:
    first = run_sync(["/bin/sh", "-c", "echo secret > left.txt; echo secret > /tmp/left.txt"], spec())
    second = run_sync(["/bin/sh", "-c", "ls -A /workspace /tmp"], spec())
    assert first.ok and second.stdout == b"/tmp:\n\n/workspace:\n"


@requires_bwrap
def test_run_sync_runs_without_an_event_loop() -> None:
    result = run_sync(["echo", "hi"], spec())
    assert result.ok and result.stdout == b"hi\n"


@requires_bwrap
def test_closing_then_draining_spares_removes_cgroup_and_state() -> None:
    from posttrain.sandbox.sandbox import SPARES

    async def go() -> tuple[object, object]:
        sb = await Sandbox.create(spec())
        root, cgroup = sb.ctx.workspace.root, sb.ctx.cgroup
        await sb.close()
        return root, cgroup

    root, cgroup = run(go())
    SPARES.drain()
    assert not root.exists()  # type: ignore[attr-defined]
    if cgroup is not None:
        assert not any(__import__("os").path.exists(p) for p in cgroup.attach_paths())  # type: ignore[attr-defined]


def test_local_backend_is_refused_when_isolation_is_required() -> None:
    with pytest.raises(SandboxUnavailable):
        run_sync(["true"], SandboxSpec(backend="local"))


def test_local_backend_runs_and_warns_when_allowed() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_sync(
            ["/bin/sh", "-c", "echo local"], SandboxSpec(backend="local", require_isolation=False)
        )
    assert result.stdout == b"local\n"
    assert any("NOT isolated" in str(w.message) for w in caught)


def test_local_backend_still_enforces_the_wall_timeout() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_sync(
            ["sleep", "30"], SandboxSpec(backend="local", require_isolation=False, timeout_s=0.3)
        )
    assert result.status == "timeout_wall"


def test_spec_rejects_files_that_escape_the_workspace() -> None:
    with pytest.raises(ValueError):
        SandboxSpec(files={"../evil": "x"})


@requires_bwrap
def test_restore_undoes_a_same_size_rewrite_made_right_after_the_snapshot() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["/bin/sh", "-c", "echo aaaa > f.txt"])
            snap = await sb.snapshot()
            await sb.exec(["/bin/sh", "-c", "echo bbbb > f.txt"])  # same size, possibly the same tick
            await sb.restore(snap)
            return await sb.read_file("f.txt")

    assert run(go()) == b"aaaa\n"


@requires_bwrap
def test_in_place_append_after_snapshot_does_not_change_the_snapshot() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec()) as sb:
            await sb.exec(["/bin/sh", "-c", "echo one > log.txt"])
            snap = await sb.snapshot()
            await sb.exec(["/bin/sh", "-c", "echo two >> log.txt"])
            await sb.restore(snap)
            return (await sb.exec(["cat", "log.txt"])).stdout

    assert run(go()) == b"one\n"


@requires_bwrap
def test_fork_outlives_its_parent() -> None:
    async def go() -> bytes:
        parent = await Sandbox.create(spec())
        await parent.exec(["/bin/sh", "-c", "echo inherited > x.txt"])
        child = await parent.fork()
        await parent.close()
        try:
            return (await child.exec(["cat", "x.txt"])).stdout
        finally:
            await child.close()

    assert run(go()) == b"inherited\n"


@requires_bwrap
def test_repeated_snapshots_of_unchanged_data_fit_the_quota() -> None:
    async def go() -> str:
        async with Sandbox.create(spec(disk_mb=8)) as sb:
            await sb.exec(["/bin/sh", "-c", "head -c 5000000 /dev/zero > data.bin"])
            for _ in range(3):
                await sb.snapshot()
            return (await sb.exec(["/bin/sh", "-c", "wc -c < data.bin"])).status

    assert run(go()) == "ok"


@requires_bwrap
def test_a_cancelled_call_does_not_hand_its_reply_to_the_next_caller() -> None:
    async def go() -> tuple[bytes, int]:
        async with SandboxPool(spec(), size=1) as pool:
            slow = asyncio.create_task(pool.run(["/bin/sh", "-c", "sleep 0.3; echo stale"]))
            await asyncio.sleep(0.1)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
            fresh = await pool.run(["echo", "fresh"])
            return fresh.stdout, pool.stats.replaced

    assert run(go()) == (b"fresh\n", 1)
