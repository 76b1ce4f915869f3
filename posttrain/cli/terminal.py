"""`posttrain tasks validate|agentbench`: terminal task packages from the command line.

`validate PATH...` checks every package under the paths (oracle 1, doing nothing 0, deterministic tests;
`posttrain.tasks.terminal.validate`); `agentbench --out DIR` converts the AgentBench OS tasks into
packages under `DIR/agentbench/` and reports kept and dropped counts with the reasons. `--json` prints
one JSON document. Exit code 1 when a package fails validation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    tasks = sub.add_parser("tasks", help="validate and convert terminal task packages")
    tsub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    p = tsub.add_parser("validate", help="oracle = 1, nothing = 0, deterministic tests, per package")
    p.add_argument("paths", nargs="+", type=Path, help="package folders or folders holding packages")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_validate)
    p = tsub.add_parser("agentbench", help="convert the AgentBench OS tasks into packages")
    p.add_argument("--out", type=Path, required=True, help="output folder (packages go to OUT/agentbench/)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_agentbench)


def cmd_validate(args: argparse.Namespace) -> int:
    from posttrain.tasks.terminal.package import find_packages
    from posttrain.tasks.terminal.validate import check_package

    checks = [check_package(root) for path in args.paths for root in find_packages(path.resolve())]
    failed = [c for c in checks if not c.ok]
    if args.json:
        rows = [{"path": str(c.path), "ok": c.ok, "seconds": round(c.seconds, 2), "failures": c.failures}
                for c in checks]  # fmt: skip
        print(json.dumps({"count": len(checks), "failed": len(failed), "packages": rows}))
    else:
        for check in checks:
            print(f"{'ok  ' if check.ok else 'FAIL'} {check.path} ({check.seconds:.1f} s)")
            for failure in check.failures:
                print(f"     {failure}")
        print(f"{len(checks) - len(failed)} of {len(checks)} packages validate")
    return 1 if failed else 0


def cmd_agentbench(args: argparse.Namespace) -> int:
    from posttrain.tasks.terminal.agentbench import convert

    report = convert(args.out).as_dict()
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['entries']} entries: {report['kept']} kept, {report['dropped']} dropped")
        for reason, count in report["reasons"].items():
            print(f"  {count:4d}  {reason}")
    return 0
