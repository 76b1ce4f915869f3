"""The `posttrain` command line: a thin dispatcher.

Each command group is a module of this package exposing `register(subparsers) -> None`; the
parsers it adds set `func(args) -> int` and delegate to the library. Registration must stay
cheap (no torch import) so `posttrain --help` is fast. Errors meant for people (`ConfigError`,
`UsageError`) are printed as one message with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence

from posttrain.errors import ConfigError, UsageError

COMMAND_MODULES: tuple[str, ...] = (
    "posttrain.cli.tasks",  # domains, score
    "posttrain.cli.sandbox",  # sandbox
    "posttrain.cli.train",  # train, eval, base, demo
    "posttrain.cli.bench",  # bench
    "posttrain.cli.terminal",  # tasks (terminal task packages)
    "posttrain.cli.report",  # report
    "posttrain.cli.hacking",  # hacking, spotcheck
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posttrain", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(key, "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except (ConfigError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        sys.stderr.close()
        return 0
