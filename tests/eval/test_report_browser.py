"""The report in a real browser: headless Chromium loads the file, runs its script, and the DOM it ends
with holds the summary's numbers and the adversarial response as text, with nothing on the console.

The console check is shown able to fail: a page with a deliberate script error, and the report with a
script planted in it (which its Content-Security-Policy blocks, and Chromium reports), are both caught.
Without Chromium the tests skip on a developer machine and fail in CI (`CI` set; `make setup` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.eval.test_report import check_summary_numbers, summary_rows
from tests.fakes.run_dir import ATTACK

CONSOLE_LINE = re.compile(r":CONSOLE(?:\(\d+\))?(?::\d+)?\]")
"""How Chromium's stderr log (`--enable-logging=stderr`) marks a console message or an uncaught error."""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail("chromium is not installed (make setup installs it)")
    pytest.skip("chromium not installed")


def browse(page: Path, profile: Path) -> tuple[str, list[str]]:
    """(the DOM after load, the console lines) of `page` in headless Chromium."""
    command = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", "--dump-dom", page.as_uri()]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if CONSOLE_LINE.search(line)]


class Texts(HTMLParser):
    """Text of every `<pre>`, and how many script elements the DOM has."""

    def __init__(self) -> None:
        super().__init__()
        self.pre: list[str] = []
        self.scripts = 0
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "pre":
            self._depth += 1
            self.pre.append("")
        self.scripts += tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.pre[-1] += data


@pytest.fixture
def report(reported_run: tuple[Path, dict[str, Any], Path]) -> tuple[Path, dict[str, Any]]:
    _, summary, path = reported_run
    return path, summary


def test_the_report_loads_cleanly_and_shows_the_summary(report: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, summary = report
    dom, console = browse(path, tmp_path / "profile")
    assert console == []
    assert re.search(r'<body[^>]*data-ready="1"', dom)  # the script ran to its last line
    check_summary_numbers(summary_rows(dom), summary)
    texts = Texts()
    texts.feed(dom)
    assert ATTACK in texts.pre  # the response is shown, as text
    assert texts.scripts == 1


def test_the_console_check_catches_errors_and_blocked_scripts(
    report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    _, console = browse(broken, tmp_path / "p1")
    assert any("undefinedFunction is not defined" in line for line in console)
    path, _ = report
    planted = tmp_path / "planted.html"
    planted.write_text(path.read_text().replace("</body>", "<script>document.title = 'x';</script></body>"))
    dom, console = browse(planted, tmp_path / "p2")
    assert any("Content Security Policy" in line for line in console)
    assert "<title>x</title>" not in dom
