"""`posttrain report RUN_DIR`: one self-contained HTML page about a run, from the run directory's files.

Reads `config.yaml`, `summary.json`, `metrics.jsonl`, `eval_<label>.json` and, when present, `matrix.json`,
`hacking.json` and `spotcheck/agreement.json` (`posttrain.eval.report_files`); renders the page
(`posttrain.eval.report_html`) to `RUN_DIR/report.html` or `out`.

Guarantees: writes only the report; no number is recomputed that a file already states, so the page
cannot disagree with `summary.json`; a missing optional file leaves its section saying so, and an
unreadable one is named in the page's "problems" list instead of failing the report. No torch.
"""

from __future__ import annotations

from pathlib import Path

from posttrain.eval.report_files import read_run
from posttrain.eval.report_html import render

REPORT_FILE = "report.html"
"""The report's default name inside the run directory."""


def write_report(run_dir: Path, out: Path | None = None, matrix_path: Path | None = None) -> Path:
    """Render the run's report to `out` (default `RUN_DIR/report.html`) and return the path."""
    page = render(read_run(run_dir, matrix_path))
    path = out or run_dir / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
