"""Writing a benchmark's report: one JSON file under the output folder, and the same report printed.

Guarantees: the file is `out_dir/filename` (the folder is created), pretty-printed JSON; stdout gets
either that JSON or the benchmark's own rendering for people. Not here: measuring or formatting figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def emit_report(
    report: dict[str, Any], out_dir: str | Path, filename: str, as_json: bool, show: Callable[[Any], None]
) -> None:
    """Write `report` to `out_dir/filename` and print it (JSON, or `show` for people)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / filename).write_text(json.dumps(report, indent=2))
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        show(report)
