"""`posttrain sandbox exec|check` through the command group's own parser."""

from __future__ import annotations

import argparse
import json

import pytest

from posttrain.cli import sandbox as sandbox_cli
from tests.sandbox.helpers import requires_bwrap


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="posttrain")
    sandbox_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


@requires_bwrap
def test_exec_passes_output_and_exit_code_through(capfd: pytest.CaptureFixture[str]) -> None:
    code = _run(["sandbox", "exec", "--", "/bin/sh", "-c", "echo hello; exit 7"])
    assert code == 7 and capfd.readouterr().out == "hello\n"


@requires_bwrap
def test_exec_json_reports_timeout(capfd: pytest.CaptureFixture[str]) -> None:
    code = _run(["sandbox", "exec", "--json", "--timeout", "0.3", "--", "sleep", "5"])
    payload = json.loads(capfd.readouterr().out)
    assert code == sandbox_cli.EXIT_TIMEOUT and payload["status"] == "timeout_wall"


def test_check_json_names_a_backend(capfd: pytest.CaptureFixture[str]) -> None:
    assert _run(["sandbox", "check", "--json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["backend"] in ("bwrap", "local") and any(
        f["feature"] == "seccomp filter" for f in report["features"]
    )


def test_bench_accepts_its_options_after_the_subcommand() -> None:
    parser = argparse.ArgumentParser(prog="posttrain")
    sandbox_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sandbox", "bench", "--quick", "--json", "--out", "/tmp/x"])
    assert (args.quick, args.json, args.out) == (True, True, "/tmp/x")
