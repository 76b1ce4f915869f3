"""Sandbox benchmark: every figure as a ratio to bare `subprocess.run` of the same command, same run.

Measures cold start (one-shot and persistent), pooled overhead, pool throughput, snapshot/restore of a
10 MB workspace, and a 1,000-run soak through a pool of 4 with a leak check (processes, mounts, cgroups,
state directories). The bare baseline runs the same interpreter binary the sandbox's `python3` resolves
to, so the pyenv shim never inflates either side. Prints a table (or `--json`) and writes
`OUT/sandbox.json`. Not here: pass/fail gating (targets are reported next to the numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from posttrain.bench.report import emit_report
from posttrain.sandbox.host import UID_SLOTS, host_features
from posttrain.sandbox.launch import Context, bwrap_options, program_env, setenv_args
from posttrain.sandbox.pool import SandboxPool
from posttrain.sandbox.sandbox import SPARES, Sandbox, _build_context, _release_context, run_sync
from posttrain.sandbox.seccomp import build_filter
from posttrain.sandbox.spec import SandboxSpec
from posttrain.sandbox.workspace import state_base

BARE_PY = os.path.realpath("/usr/bin/python3") if os.path.exists("/usr/bin/python3") else "python3"
PASS = ["python3", "-c", "pass"]
PRINT1 = ["python3", "-c", "print(1)"]
SETTLE_S = 0.01
"""Untimed pause before every timing: lets a side's background work (a one-shot run's recycle and next
launcher, the supervisor's next prepared child, about 1-3 ms of CPU) finish so it never overlaps a
timing of the other side."""
TARGETS = {"cold_oneshot_ratio_p50": 1.5, "pooled_overhead_ms_p50": 3.0, "throughput_ratio": 0.7,
           "snapshot_ms_p50": 10.0, "restore_ms_p50": 10.0}  # fmt: skip


def _p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _time(func: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        func()
        out.append(time.perf_counter() - start)
    return out


async def _atime(func: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await func()
        out.append(time.perf_counter() - start)
    return out


def bare(argv: list[str]) -> None:
    # A new session, as the sandbox's processes get: with sched_autogroup each session is its own
    # scheduling group, so without this a loaded host would favour the sandbox over the baseline.
    subprocess.run([BARE_PY, *argv[1:]], capture_output=True, check=True, start_new_session=True)


def _interleaved(
    sides: list[Callable[[], object]], n: int, settle: Callable[[], object] = lambda: None
) -> list[list[float]]:
    """Alternate the sides call by call so load from other processes hits all of them alike.

    `settle` runs untimed before every call, so work one side leaves running in the background (a
    one-shot run's recycle) never overlaps a timing of another.
    """
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(n):
        for side, out in zip(sides, times, strict=True):
            settle()
            out += _time(side, 1)
    return times


def _settle() -> None:
    SPARES.settle()
    time.sleep(SETTLE_S)


def bwrap_alone(ctx: Context, argv: list[str]) -> Callable[[], None]:
    """Reference: bwrap with the sandbox's own isolation options, no gate, uid drop, cgroup or parking."""
    options = bwrap_options(ctx, persistent=False)
    options = options[options.index(str(ctx.features.bwrap)) :]  # no setpriv prefix
    command = [*options, *setenv_args(program_env(ctx)), "--", *argv]
    bpf = build_filter(deny_inet=ctx.spec.network == "none") or b""

    def run() -> None:
        sec_r, sec_w = os.pipe()
        os.write(sec_w, bpf)
        os.close(sec_w)
        status_r, status_w = os.pipe()
        numbered = list(command)  # the launcher's fixed fd numbers, renumbered to what subprocess keeps
        for flag, fd in (("--seccomp", sec_r), ("--json-status-fd", status_w)):
            if flag in numbered:
                numbered[numbered.index(flag) + 1] = str(fd)
        try:
            subprocess.run(
                numbered, capture_output=True, check=True, start_new_session=True, pass_fds=(sec_r, status_w)
            )
        finally:
            for fd in (sec_r, status_r, status_w):
                os.close(fd)

    return run


def cold(spec: SandboxSpec, n: int) -> dict[str, float]:
    oneshot = lambda: _checked(run_sync(PASS, spec))  # noqa: E731
    reference_ctx = _build_context(spec)
    try:
        bare_s, oneshot_s, alone_s = _interleaved(
            [lambda: bare(PASS), oneshot, bwrap_alone(reference_ctx, PASS)], n, _settle
        )
    finally:
        _release_context(reference_ctx)
    # Back to back: each run also waits for the previous one's recycle, as a tight loop of scripts would.
    bare_b2b, oneshot_b2b = _interleaved([lambda: bare(PASS), oneshot], n)

    async def session() -> None:
        async with Sandbox.create(spec) as sb:
            _checked(await sb.exec(PASS))

    async def both() -> tuple[list[float], list[float]]:
        bare_a: list[float] = []
        sess: list[float] = []
        for _ in range(n):
            bare_a += _time(lambda: bare(PASS), 1)
            sess += await _atime(session, 1)
        return bare_a, sess

    bare2_s, session_s = asyncio.run(both())
    return {
        "bare_ms_p50": _p50_ms(bare_s), "cold_oneshot_ms_p50": _p50_ms(oneshot_s),
        "cold_session_ms_p50": _p50_ms(session_s),
        "cold_oneshot_ratio_p50": _p50_ms(oneshot_s) / _p50_ms(bare_s),
        "bwrap_alone_ms_p50": _p50_ms(alone_s),
        "bwrap_alone_ratio_p50": _p50_ms(alone_s) / _p50_ms(bare_s),
        "oneshot_back_to_back_ms_p50": _p50_ms(oneshot_b2b),
        "oneshot_back_to_back_ratio_p50": _p50_ms(oneshot_b2b) / _p50_ms(bare_b2b),
        "cold_session_ratio_p50": _p50_ms(session_s) / _p50_ms(bare2_s),
    }  # fmt: skip


def _checked(result: Any) -> Any:
    if result.status != "ok":
        raise RuntimeError(f"benchmark run failed: {result.status} {result.error} {result.stderr[-300:]!r}")
    return result


def pooled(spec: SandboxSpec, n: int) -> dict[str, float]:
    async def go() -> tuple[list[float], list[float]]:
        bare_s: list[float] = []
        pool_s: list[float] = []
        async with SandboxPool(spec, size=1) as pool:
            await pool.run(PASS)
            for _ in range(n):
                await asyncio.sleep(SETTLE_S)
                bare_s += _time(lambda: bare(PASS), 1)
                await asyncio.sleep(SETTLE_S)
                pool_s += await _atime(lambda: _acheck(pool.run(PASS)), 1)
        return bare_s, pool_s

    bare_s, pool_s = asyncio.run(go())
    paired = [p - b for p, b in zip(pool_s, bare_s, strict=True)]
    return {"pooled_ms_p50": _p50_ms(pool_s), "pooled_bare_ms_p50": _p50_ms(bare_s),
            "pooled_overhead_ms_p50": _p50_ms(pool_s) - _p50_ms(bare_s),
            "pooled_overhead_paired_ms_p50": _p50_ms(paired), "pooled_samples": n}  # fmt: skip


async def _acheck(coro: Any) -> Any:
    return _checked(await coro)


def throughput(spec: SandboxSpec, n: int, concurrency: int) -> dict[str, float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as executor:
        list(executor.map(lambda _: bare(PRINT1), range(n)))
    bare_rate = n / (time.perf_counter() - start)

    async def go() -> float:
        async with SandboxPool(spec, size=concurrency) as pool:
            begin = time.perf_counter()
            results = await asyncio.gather(*(pool.run(PRINT1) for _ in range(n)))
            elapsed = time.perf_counter() - begin
            for result in results:
                _checked(result)
            return n / elapsed

    pool_rate = asyncio.run(go())
    return {"bare_runs_per_s": bare_rate, "pool_runs_per_s": pool_rate, "throughput_ratio": pool_rate / bare_rate,
            "concurrency": concurrency}  # fmt: skip


def snapshots(spec: SandboxSpec, n: int) -> dict[str, float]:
    async def go(files: int) -> tuple[list[float], list[float]]:
        size = (10 << 20) // files
        async with Sandbox.create(spec.model_copy(update={"disk_mb": 64})) as sb:
            await sb.exec(
                [
                    "python3",
                    "-c",
                    f"import os\nfor i in range({files}): open(f'f{{i}}', 'wb').write(os.urandom({size}))",
                ]
            )
            snap_s, restore_s = [], []
            for _ in range(n):
                start = time.perf_counter()
                snap = await sb.snapshot()
                snap_s.append(time.perf_counter() - start)
                await sb.exec(["/bin/sh", "-c", "rm -f f1 && echo changed > f2"])
                start = time.perf_counter()
                await sb.restore(snap)
                restore_s.append(time.perf_counter() - start)
                snap.discard()
            return snap_s, restore_s

    big_snap, big_restore = asyncio.run(go(10))
    small_snap, small_restore = asyncio.run(go(1000))
    return {"snapshot_ms_p50": _p50_ms(big_snap), "restore_ms_p50": _p50_ms(big_restore),
            "snapshot_1000_files_ms_p50": _p50_ms(small_snap), "restore_1000_files_ms_p50": _p50_ms(small_restore)}  # fmt: skip


def soak(spec: SandboxSpec, n: int, size: int) -> dict[str, Any]:
    async def go() -> tuple[int, int, int]:
        async with SandboxPool(spec, size=size) as pool:
            results = await asyncio.gather(*(pool.run(["echo", str(i)]) for i in range(n)))
            correct = sum(r.status == "ok" and r.stdout == f"{i}\n".encode() for i, r in enumerate(results))
            return len(results), correct, pool.stats.infra_errors

    start = time.perf_counter()
    completed, correct, infra = asyncio.run(go())
    elapsed = time.perf_counter() - start
    SPARES.drain()  # emptied workspaces/cgroups kept for reuse are not leaks; remove them before counting
    leaks = leak_report()
    return {"runs": n, "pool_size": size, "completed": completed, "correct": correct, "sandbox_errors": infra,
            "seconds": elapsed, "leaks": leaks, "leaked_anything": any(leaks.values())}  # fmt: skip


def leak_report() -> dict[str, int]:
    """Processes, mounts, cgroups and state directories left behind by this process's sandboxes."""
    base = state_base()
    own = f"{os.getpid()}-"
    mounts = sum(f"{base}/{own}" in line for line in Path("/proc/self/mountinfo").read_text().splitlines())
    dirs = sum(1 for p in base.iterdir() if p.name.startswith(own)) if base.exists() else 0
    snaps = base / "snapshots"
    dirs += sum(1 for p in snaps.iterdir() if p.name.startswith(own)) if snaps.exists() else 0
    manager = host_features().cgroups
    marker = f"posttrain-sandbox-{os.getpid()}/"  # other processes on the host may run sandboxes too
    procs = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            status = (proc / "status").read_text().splitlines()
            cgroups = (proc / "cgroup").read_text() if manager is not None else marker
        except OSError:
            continue
        uid_line = next((line for line in status if line.startswith("Uid:")), "Uid: -1")
        procs += int(uid_line.split()[1]) in UID_SLOTS.uids and marker in cgroups
    groups = manager.leftover_groups() if manager is not None else 0
    return {"processes": procs, "mounts": mounts, "cgroups": groups, "state_dirs": dirs}


def run_all(quick: bool) -> dict[str, Any]:
    spec = SandboxSpec(timeout_s=30, memory_mb=512)
    n = 15 if quick else 40
    features = host_features()
    report: dict[str, Any] = {
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "kernel": platform.release(),
                 "cgroups": features.cgroup_reason, "python": BARE_PY},
        "command": "posttrain sandbox bench" + (" --quick" if quick else ""),
    }  # fmt: skip
    report["cold"] = cold(spec, n)
    report["pooled"] = pooled(spec, 2 * n if quick else 100)  # a difference of two noisy medians
    report["throughput"] = throughput(spec, 60 if quick else 200, concurrency=4)
    report["snapshot"] = snapshots(spec, 5 if quick else 10)
    report["soak"] = soak(spec, 200 if quick else 1000, size=4)
    flat = {
        k: v for section in ("cold", "pooled", "throughput", "snapshot") for k, v in report[section].items()
    }
    report["targets"] = {
        name: {"target": target, "measured": flat[name],
               "met": flat[name] >= target if name == "throughput_ratio" else flat[name] <= target}
        for name, target in TARGETS.items()
    }  # fmt: skip
    soak_ok = report["soak"]["correct"] == report["soak"]["runs"] and not report["soak"]["leaked_anything"]
    report["targets"]["soak_all_complete_nothing_leaked"] = {
        "target": True,
        "measured": soak_ok,
        "met": soak_ok,
    }
    return report


def print_table(report: dict[str, Any]) -> None:
    print(f"sandbox benchmark on {report['host']['cpus']} CPUs, {report['host']['cgroups']}")
    for name, row in report["targets"].items():
        measured = row["measured"]
        shown = f"{measured:.2f}" if isinstance(measured, float) else str(measured)
        print(f"  {name:<36} {shown:>10}  target {row['target']!s:>6}  {'met' if row['met'] else 'MISSED'}")
    cold_part = report["cold"]
    print(f"  bare python3 -c pass p50 {cold_part['bare_ms_p50']:.2f} ms; one-shot {cold_part['cold_oneshot_ms_p50']:.2f} ms;"
          f" persistent create+exec+close {cold_part['cold_session_ms_p50']:.2f} ms")  # fmt: skip
    print(f"  one-shot back to back {cold_part['oneshot_back_to_back_ms_p50']:.2f} ms"
          f" ({cold_part['oneshot_back_to_back_ratio_p50']:.2f}x bare); reference, bwrap alone with the same"
          f" options {cold_part['bwrap_alone_ms_p50']:.2f} ms ({cold_part['bwrap_alone_ratio_p50']:.2f}x)")  # fmt: skip
    pool = report["pooled"]
    print(f"  pooled {pool['pooled_ms_p50']:.2f} ms vs bare {pool['pooled_bare_ms_p50']:.2f} ms over"
          f" {pool['pooled_samples']} pairs; median of paired differences {pool['pooled_overhead_paired_ms_p50']:.2f} ms")  # fmt: skip
    print(
        f"  soak: {report['soak']['correct']}/{report['soak']['runs']} correct, leaks {report['soak']['leaks']}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain bench sandbox", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--out", default="bench/results", help="directory for sandbox.json")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    args = parser.parse_args(argv)
    if not host_features().bwrap_usable:
        print("sandbox benchmark skipped: bubblewrap is not usable on this host")
        return 0
    report = run_all(args.quick)
    emit_report(report, args.out, "sandbox.json", args.json, print_table)
    return 0
