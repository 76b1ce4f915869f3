"""A synthetic run directory and its report, written once for the report's tests and its browser test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from posttrain.eval.report import write_report
from tests.fakes.run_dir import write_run_dir


@pytest.fixture(scope="session")
def reported_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    """(run dir with every optional file, its summary, its report.html)."""
    run_dir = tmp_path_factory.mktemp("reported_run")
    summary = write_run_dir(run_dir)
    return run_dir, summary, write_report(run_dir)
