"""The HTML run report: the summary's numbers in its table, escaped run text, every section from the
optional files and without them, tolerant readers, the CLI, and no torch."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from posttrain.cli import main
from posttrain.errors import UsageError
from posttrain.eval.report import write_report
from posttrain.eval.report_figures import moving_average
from posttrain.eval.report_files import read_run
from posttrain.eval.report_html import SCRIPT, fmt, interval
from posttrain.eval.report_svg import Cell, Curve, heat_map, reward_chart, stacked_area
from tests.fakes.run_dir import (
    ATTACK,
    CONFIG_ATTACK,
    DOMAIN_ATTACK,
    DOMAINS,
    TRAINED,
    UNTRAINED,
    write_run_dir,
)


class SummaryRows(HTMLParser):
    """The summary table's rows: `data-domain` (or `data-mean`) -> {cell class: text, and
    `<class>@sort`: the cell's `data-sort`, the unrounded number}."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self._row: dict[str, str] | None = None
        self._cell: str | None = None
        self._in_table = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self._in_table = found.get("id") == "summary-table"
        elif tag == "tr" and self._in_table:
            key = found.get("data-domain") or found.get("data-mean")
            self._row = self.rows.setdefault(key, {}) if key else None
        elif tag == "td" and self._row is not None:
            self._cell = (found.get("class") or "").split(" ")[-1]
            self._row.setdefault(self._cell, "")
            if found.get("data-sort") is not None:
                self._row[f"{self._cell}@sort"] = found["data-sort"] or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "table":
            self._in_table = False

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell:
            self._row[self._cell] += data


def summary_rows(page: str) -> dict[str, dict[str, str]]:
    parser = SummaryRows()
    parser.feed(page)
    return parser.rows


def check_summary_numbers(rows: dict[str, dict[str, str]], summary: dict[str, Any]) -> None:
    """Every domain row and the mean rows show the summary's own numbers (shared with the browser test)."""
    assert set(summary["domains"]) <= set(rows)
    for domain, entry in summary["domains"].items():
        row = rows[domain]
        for cell, key in (("base", "base_reward"), ("final", "final_reward"), ("delta", "delta_reward")):
            assert float(row[f"{cell}@sort"]) == entry[key]  # the summary's own number, unrounded
            assert row[cell] == (f"{entry[key]:+.3f}" if cell == "delta" else f"{entry[key]:.3f}")  # shown
        assert row["n"] == str(entry["num_paired"])
        assert row["verdict"].startswith(entry["verdict"])
    assert rows["mean, trained"]["delta"] == f"{summary['mean_delta']['delta']:+.3f}"
    if "untrained" in summary:
        assert rows["mean, untrained"]["final"] == f"{summary['untrained']['mean_final_reward']:.3f}"


@pytest.fixture
def run(reported_run: tuple[Path, dict[str, Any], Path]) -> tuple[Path, dict[str, Any], str]:
    run_dir, summary, path = reported_run
    return run_dir, summary, path.read_text(encoding="utf-8")


def test_the_table_shows_the_summary_numbers(run: tuple[Path, dict[str, Any], str]) -> None:
    _, summary, page = run
    rows = summary_rows(page)
    check_summary_numbers(rows, summary)
    assert summary["domains"][UNTRAINED[0]]["dropped"]
    assert "DROPPED" in rows[UNTRAINED[0]]["verdict"] and rows[UNTRAINED[0]]["trained"] == "no"
    assert rows[TRAINED[0]]["verdict"] == "improved"


def test_run_text_is_escaped_and_only_the_report_script_is_on_the_page(run: tuple[Path, dict[str, Any], str]) -> None:
    _, _, page = run
    assert ATTACK not in page and CONFIG_ATTACK not in page and DOMAIN_ATTACK not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/pre&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;b onmouseover=&quot;alert(3)&quot;&gt;" in page
    assert page.lower().count("<script") == 1
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page and f"<script>{SCRIPT}</script>" in page
    assert not re.findall(r'(?:src|href)="(?!#)', page)  # nothing to fetch: no network, no files
    assert "@import" not in page and "url(" not in page


def test_every_section_has_its_content(run: tuple[Path, dict[str, Any], str]) -> None:
    _, _, page = run
    sections = dict(re.findall(r'<section id="(\w+)">(.*?)</section>', page, flags=re.S))
    assert list(sections) == ["config", "summary", "classes", "gate", "curves", "weights", "hacking", "spotcheck"]
    assert "<details><summary>config.yaml" in sections["config"] and "tasks_per_step: 16" in sections["config"]
    heat = sections["classes"]
    assert "From matrix.json: reward" in heat
    assert ">0.30 (-0.50)<" in heat  # the math aggregate: base 0.8, final 0.3
    assert "final · text: mean reward 0.750 over 1 domains" in heat  # no text aggregate: the cells' mean
    assert "FAILED" in sections["gate"] and "class math" in sections["gate"] and "-0.500" in sections["gate"]
    assert sections["curves"].count('<div class="card"') == len(DOMAINS)
    assert sections["curves"].count("<polyline") == 2 * len(TRAINED)  # untrained: evaluations only
    assert sections["weights"].count("<polygon") == len(TRAINED)
    assert "1 of 2 checks fired" in sections["hacking"] and "first 4000 of 5000 characters" in sections["hacking"]
    assert "0.925" in sections["spotcheck"] and "[0.850, 1.000]" in sections["spotcheck"]
    assert "<td>–</td>" in sections["spotcheck"] and "all domains" in sections["spotcheck"]  # null agreement


def test_without_the_optional_files_the_report_says_so(tmp_path: Path) -> None:
    summary = write_run_dir(tmp_path, optional=False)
    page = write_report(tmp_path).read_text()
    check_summary_numbers(summary_rows(page), summary)
    assert "No matrix.json: mean held-out greedy reward" in page
    assert ">0.75 (+0.55)<" in page  # text, trained: reverse 0.2 -> 0.75
    assert "math · untrained" in page
    assert "1 dropped" in page and "no hacking.json" in page and "no spotcheck/agreement.json" in page


def test_a_broken_file_is_listed_not_fatal(tmp_path: Path) -> None:
    write_run_dir(tmp_path, optional=False)
    (tmp_path / "hacking.json").write_text("{not json")
    with (tmp_path / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 7, "loss"')  # a run killed mid-line
    files = read_run(tmp_path)
    assert len(files.rows) == 6 and files.hacking is None
    assert [p.split(":")[0] for p in files.problems] == ["metrics.jsonl", "hacking.json"]
    page = write_report(tmp_path, out=tmp_path / "out" / "r.html").read_text()
    assert '<section id="problems">' in page and "metrics.jsonl:7" in page


def test_a_run_with_only_a_config_renders(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("steps: 3\n")
    page = write_report(tmp_path).read_text()
    assert "no summary.json" in page and "no mixture weights" in page and "No regression gate" in page


def test_the_matrix_file_can_be_named_and_may_sit_in_a_subfolder(tmp_path: Path) -> None:
    write_run_dir(tmp_path)
    (tmp_path / "eval_out").mkdir()
    (tmp_path / "matrix.json").rename(tmp_path / "eval_out" / "matrix.json")
    assert read_run(tmp_path).matrix_path == tmp_path / "eval_out" / "matrix.json"
    with pytest.raises(UsageError, match="no such file"):
        read_run(tmp_path, tmp_path / "missing.json")


def test_the_same_files_give_the_same_page(run: tuple[Path, dict[str, Any], str], tmp_path: Path) -> None:
    run_dir, _, page = run
    assert write_report(run_dir, out=tmp_path / "again.html").read_text(encoding="utf-8") == page


def test_cli_writes_the_report_and_rejects_what_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run_dir(tmp_path / "run", optional=False)
    assert main(["report", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_moving_average_pools_the_samples_of_each_window() -> None:
    # steps 1..4, rewards 0, 1, 0, 1 with 1, 3, 1, 3 samples; half width 1:
    # step 1: (0*1 + 1*3) / 4 = 0.75; step 2: (0 + 3 + 0) / 5 = 0.6; step 3: (3 + 0 + 3) / 7; step 4: 3 / 4
    assert moving_average([1, 2, 3, 4], [0, 1, 0, 1], [1, 3, 1, 3], 1) == pytest.approx([0.75, 0.6, 6 / 7, 0.75])
    # a step that was not sampled is simply absent: steps 1 and 5 are 4 apart, so each stands alone
    assert moving_average([1, 5], [0.0, 1.0], [1, 1], 2) == [0.0, 1.0]


def test_formatting_never_prints_nan() -> None:
    assert fmt(float("nan")) == "–" and fmt(None) == "–" and fmt(True) == "–" and fmt(0.5, signed=True) == "+0.500"
    assert interval(float("nan"), 1.0) == "–" and interval(-0.1, 0.2, signed=True) == "[-0.100, +0.200]"


def test_svg_skips_what_is_not_finite_and_escapes_labels() -> None:
    chart = reward_chart([Curve([1, 2, 3], [0.5, float("nan"), 1.0], "train")], None, 3, title="<t>")
    assert 'points="' in chart and chart.count(",") == 2 and "&lt;t&gt;" in chart
    assert "<polyline" not in reward_chart([Curve([1], [float("inf")], "train")], None, 3, title="t")
    heat = heat_map(["<r>"], ["c&"], {("<r>", "c&"): Cell(float("nan"), "x", "y")})
    assert 'class="empty"' in heat and "&lt;r&gt;" in heat and "c&amp;" in heat
    area = stacked_area([1], [[float("nan")], [1.0]], ["a", "<b>"], ["red", "blue"])
    assert area.count("<polygon") == 2 and "&lt;b&gt;" in area


def test_the_report_and_its_command_load_no_torch() -> None:
    code = ("import sys; import posttrain.eval.report; from posttrain.cli import "
            "build_parser; build_parser(); print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'wandb', 'mlflow', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout  # fmt: skip
    assert json.loads(out) == []
