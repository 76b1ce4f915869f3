"""`posttrain report RUN_DIR`: write the run's self-contained HTML report (`posttrain.eval.report`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="one self-contained HTML page about a run (tables, charts, alarms)")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--matrix", type=Path, help="matrix.json to show (default: RUN_DIR/matrix.json or RUN_DIR/*/matrix.json)")
    p.add_argument("--out", type=Path, help="output file (default: RUN_DIR/report.html)")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from posttrain.eval.report import write_report

    path = write_report(args.run_dir, out=args.out, matrix_path=args.matrix)
    print(f"{path} ({path.stat().st_size / 1024:.0f} KB)")
    return 0
