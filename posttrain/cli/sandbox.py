"""`posttrain sandbox exec|check|bench`: run one command sandboxed, report host isolation, benchmark.

Registration imports nothing heavy; the sandbox modules load when a command runs.
`exec` exits with the program's exit code (128+N for signal N, 124 for a timeout, 125 for a sandbox
error) unless `--json` is given, which prints the whole `ExecResult` instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_TIMEOUT, EXIT_SANDBOX_ERROR = 124, 125


def register(sub: Any) -> None:
    parser = sub.add_parser("sandbox", help="run programs in isolated sandboxes")
    group = parser.add_subparsers(dest="sandbox_command", metavar="SUBCOMMAND")
    run = group.add_parser("exec", help="run one command in a fresh sandbox")
    run.add_argument("--timeout", type=float, default=10.0, help="wall-clock limit in seconds")
    run.add_argument("--memory-mb", type=int, default=512, help="memory limit in MB")
    run.add_argument("--network", choices=("none", "loopback"), default="none")
    run.add_argument("--backend", choices=("auto", "bwrap", "local"), default="auto")
    run.add_argument("--allow-local", action="store_true", help="permit the NON-isolating local backend")
    run.add_argument("--json", action="store_true", help="print the ExecResult as JSON")
    run.add_argument("--stdin", action="store_true", help="pass this command's standard input to the program")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    run.set_defaults(func=_exec)
    check = group.add_parser("check", help="show which isolation features this host has")
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=_check)
    bench = group.add_parser("bench", help="run the sandbox benchmark")
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.add_argument("--out", default="bench/results", help="directory for sandbox.json")
    bench.add_argument("--quick", action="store_true", help="fewer repetitions (smoke run)")
    bench.set_defaults(func=_bench)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _exec(args: argparse.Namespace) -> int:
    from posttrain.errors import UsageError
    from posttrain.sandbox import SandboxSpec, SandboxUnavailable, run_sync

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise UsageError("sandbox exec needs a command after --")
    spec = SandboxSpec(
        timeout_s=args.timeout, memory_mb=args.memory_mb, network=args.network, backend=args.backend,
        require_isolation=not args.allow_local,
    )  # fmt: skip
    try:
        result = run_sync(cmd, spec, stdin=sys.stdin.buffer.read() if args.stdin else b"")
    except SandboxUnavailable as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        payload = result.model_dump(mode="json", exclude={"stdout", "stderr"})
        payload["stdout"] = result.stdout.decode(errors="replace")
        payload["stderr"] = result.stderr.decode(errors="replace")
        print(json.dumps(payload, indent=2))
    else:
        sys.stdout.buffer.write(result.stdout)
        sys.stderr.buffer.write(result.stderr)
        if result.status not in ("ok", "runtime_error"):
            print(f"sandbox: {result.status} {result.error}", file=sys.stderr)
    return _exit_code(result.status, result.exit_code, result.signal)


def _exit_code(status: str, exit_code: int | None, signal: int | None) -> int:
    if status == "sandbox_error":
        return EXIT_SANDBOX_ERROR
    if status in ("timeout_wall", "timeout_cpu"):
        return EXIT_TIMEOUT
    if signal is not None:
        return 128 + signal
    return exit_code if exit_code is not None else 1


def _check(args: argparse.Namespace) -> int:
    from posttrain.sandbox.host import backend_for, host_features

    features = host_features()
    chosen, reason = backend_for("auto", require_isolation=True)
    fallback, fallback_reason = backend_for("auto", require_isolation=False)
    if args.json:
        rows = [{"feature": n, "available": ok, "detail": d} for n, ok, d in features.table()]
        print(
            json.dumps(
                {
                    "features": rows,
                    "backend": chosen or fallback,
                    "isolated": chosen == "bwrap",
                    "reason": reason if chosen else fallback_reason,
                    "notes": features.notes,
                },
                indent=2,
            )
        )
        return 0
    for name, ok, detail in features.table():
        print(f"  [{'x' if ok else ' '}] {name:<34} {detail}")
    for note in features.notes:
        print(f"  note: {note}")
    if chosen:
        print(f"backend: {chosen} ({reason})")
    else:
        print(f"backend: {fallback or 'none'} — {fallback_reason}; with isolation required: {reason}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from posttrain.bench.sandbox import main

    argv = ["--out", args.out] + (["--json"] if args.json else []) + (["--quick"] if args.quick else [])
    return main(argv)
