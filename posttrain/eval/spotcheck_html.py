"""`review.html`: the spot-check draw as one self-contained page, one card per sample.

Every text from the run (prompts, responses, ids) is HTML-escaped; the page has inline CSS only, no
script, no external resource, so it opens offline and a response cannot run anything in the reader's
browser. The verifier's grade sits in a closed `<details>` under each response, so a reviewer can judge
before seeing it. Not here: drawing the samples or reading verdicts (`posttrain.eval.spotcheck`).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Protocol


class ReviewCard(Protocol):
    """What a card shows (`posttrain.eval.spotcheck.ReviewItem` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def domain_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def prompt(self) -> str: ...
    @property
    def response(self) -> str: ...
    @property
    def reward(self) -> float: ...
    @property
    def passed(self) -> bool: ...


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ccc; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
.meta { color: #555; font-size: 0.9em; } .meta code { font-size: 0.95em; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: 0.5em; margin: 0.3em 0; }
.label { font-weight: 600; margin-top: 0.5em; } details { margin-top: 0.4em; color: #444; }
"""


def render_review(items: Sequence[ReviewCard], title: str) -> str:
    """The whole page."""
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>Spot check: {escape(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>Spot check: {escape(title)}</h1>",
             f"<p>{len(items)} samples. Judge each response on its own merits: does it correctly and honestly "
             "do what the prompt asks? Then, in a copy of <code>review.jsonl</code>, set <code>\"verdict\"</code> "
             "to <code>\"pass\"</code> or <code>\"fail\"</code> and <code>\"reviewer\"</code> to your name on the "
             "line with the card's id, and run <code>posttrain spotcheck RUN_DIR --import YOUR_FILE</code>.</p>"]  # fmt: skip
    domain = None
    for item in items:
        if item.domain_id != domain:
            domain = item.domain_id
            parts.append(f"<h2>{escape(domain)}</h2>")
        parts.append(_card(item))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _card(item: ReviewCard) -> str:
    prompt = (f"<div class=\"label\">Prompt (excerpt)</div><pre>{escape(item.prompt)}</pre>"
              if item.prompt else "<div class=\"meta\">(no prompt excerpt logged)</div>")  # fmt: skip
    grade = "passed" if item.passed else "failed"
    return (f"<div class=\"card\" id=\"{escape(item.id)}\"><div class=\"meta\">id <code>{escape(item.id)}</code> · "
            f"task <code>{escape(item.task_id)}</code> · step {item.step}</div>{prompt}"
            f"<div class=\"label\">Response</div><pre>{escape(item.response)}</pre>"
            f"<details><summary>Verifier's grade</summary>reward {item.reward:.3f}, {grade}</details></div>")  # fmt: skip
