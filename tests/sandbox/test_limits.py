"""Resource attacks: bombs, loops, floods. Each must end with a program status, never a host problem."""

from __future__ import annotations

import asyncio

from posttrain.sandbox import Sandbox

from .helpers import PY, py, requires_bwrap, run, run_leftovers, sh, spec, with_ticker

pytestmark = requires_bwrap

INFRA = "sandbox_error"


def _bomb_keeps_host_ticking(argv: list[str], **fields: object) -> tuple[str, int, list[int]]:
    async def go() -> tuple[str, int, list[int]]:
        async with Sandbox.create(spec(**fields)) as sb:
            baseline = sb.ctx.cgroup.pids() if sb.ctx.cgroup else []
            result, ticks = await with_ticker(lambda: sb.exec(argv))
            after = sb.ctx.cgroup.pids() if sb.ctx.cgroup else []
            assert run_leftovers(baseline, after) == [], (baseline, after)
            return result.status, ticks, after

    return run(go())


def test_python_fork_bomb_is_contained_and_host_keeps_ticking() -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    status, ticks, _ = _bomb_keeps_host_ticking([PY, "-c", code], timeout_s=1.5, pids=32)
    assert status == "timeout_wall"
    assert ticks >= 20  # ~150 expected at 10 ms; a frozen host would give ~0


def test_bash_fork_bomb_is_contained() -> None:
    status, ticks, _ = _bomb_keeps_host_ticking(
        ["bash", "-c", ":(){ :|:& };:; sleep 5"], timeout_s=1.5, pids=32
    )
    assert status in ("timeout_wall", "runtime_error", "ok")
    assert ticks >= 20


def test_thread_bomb_hits_pids_limit() -> None:
    code = (
        "import threading, time\nn = 0\ntry:\n    while True:\n"
        "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start(); n += 1\n"
        "except RuntimeError:\n    print(n)\n    raise SystemExit(3)\n"
    )
    result = py(code, pids=16, timeout_s=5)
    assert result.status == "runtime_error" and result.exit_code == 3
    assert int(result.stdout) < 16  # threads count against the pids limit


def test_rss_memory_bomb_reports_memory_limit() -> None:
    code = "a = []\nwhile True:\n    a.append(bytearray(8 << 20))\n"
    result = py(code, memory_mb=64, disk_mb=8, timeout_s=10)
    assert result.status == "memory_limit", result


def test_address_space_bomb_fails_inside_not_on_host() -> None:
    result = py("b = bytearray(1 << 40)\n", memory_mb=64, disk_mb=8)
    assert result.status in ("runtime_error", "memory_limit")


def test_cpu_loop_reports_cpu_timeout() -> None:
    result = py("while True:\n    pass\n", cpu_time_s=1, timeout_s=10)
    assert result.status == "timeout_cpu"


def test_sleep_forever_reports_wall_timeout() -> None:
    result = sh("sleep 1000", timeout_s=0.5)
    assert result.status == "timeout_wall"


def test_reading_stdin_gets_eof_instead_of_blocking() -> None:
    result = py("import sys\nprint(len(sys.stdin.read()))", timeout_s=5)
    assert result.status == "ok" and result.stdout == b"0\n"


def test_stdin_is_delivered() -> None:
    async def go() -> bytes:
        async with Sandbox.create(spec()) as sb:
            return (await sb.exec(["cat"], stdin=b"x" * 200_000)).stdout

    out = run(go())
    assert len(out) == 65536  # 200 000 bytes in, head+tail of 32 KiB each kept


def test_100mb_of_stdout_is_killed_as_output_limit() -> None:
    result = sh("head -c 100000000 /dev/zero", output_limit_mb=64, timeout_s=20)
    assert result.status == "output_limit"
    assert len(result.stdout) <= 65536


def test_long_output_keeps_head_and_tail_with_original_count() -> None:
    code = "import sys\nsys.stdout.write('H' * 1000 + 'x' * 2_000_000 + 'T' * 1000)"
    result = py(code, max_output_bytes=4096)
    assert result.status == "ok"
    assert result.stdout_bytes == 2_002_000
    assert result.stdout[:1000] == b"H" * 1000 and result.stdout[-1000:] == b"T" * 1000
    assert len(result.stdout) == 4096


def test_binary_and_invalid_utf8_output_is_returned_verbatim() -> None:
    result = py("import sys\nsys.stdout.buffer.write(bytes(range(256)) + b'\\xff\\xfe\\xc3')")
    assert result.stdout == bytes(range(256)) + b"\xff\xfe\xc3"


def test_one_huge_file_is_capped() -> None:
    result = sh("head -c 200000000 /dev/zero > big; s=$?; wc -c < big; exit $s", disk_mb=16)
    assert result.status == "runtime_error"
    assert int(result.stdout) <= 16 << 20


def test_many_small_files_hit_the_quota() -> None:
    code = (
        "import os\nn = 0\ntry:\n    while n < 20000:\n"
        "        fd = os.open(f'f{n}', os.O_WRONLY | os.O_CREAT); os.write(fd, b'x' * 100); os.close(fd); n += 1\n"
        "except OSError as e:\n    print(e.errno)\n    raise SystemExit(4)\n"
    )
    result = py(code, disk_mb=4, timeout_s=20)
    assert result.exit_code == 4 and result.stdout.strip() == b"28"  # ENOSPC after ~1000 one-page files


def test_fd_exhaustion_stops_at_nofile() -> None:
    code = "import os\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\nexcept OSError as e:\n    print(len(fds), e.errno)\n"
    result = py(code, nofile=64)
    count, errno_value = result.stdout.split()
    assert int(count) < 64 and int(errno_value) == 24  # EMFILE


def test_segfault_is_reported_with_its_signal() -> None:
    result = py("import ctypes\nctypes.string_at(0)")
    assert result.status == "runtime_error" and result.signal == 11


def test_concurrent_bombs_in_two_sandboxes_do_not_disturb_a_third() -> None:
    async def go() -> str:
        async with (
            Sandbox.create(spec(timeout_s=1.5, pids=16)) as a,
            Sandbox.create(spec(timeout_s=1.5)) as b,
            Sandbox.create(spec()) as c,
        ):
            bomb = [PY, "-c", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n"]
            results = await asyncio.gather(
                a.exec(bomb), b.exec([PY, "-c", "while True: pass"]), c.exec(["echo", "fine"])
            )
            return results[2].stdout.decode()

    assert run(go()) == "fine\n"


def test_cpu_cap_limits_cores_used() -> None:
    result = py("import time\nend = time.time() + 1.0\nwhile time.time() < end:\n    pass\n", cpus=0.25)
    assert result.status == "ok"
    assert result.cpu_ms < 0.6 * result.wall_ms  # a quarter core by quota; uncapped it would be ~1.0
