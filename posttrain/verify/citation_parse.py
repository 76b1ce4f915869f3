"""Reading a cited answer out of a response: the `Answer:` block, the `Citations:` line, cite keys.

The format (stated in every knowledge prompt, docs/knowledge.md):

    Answer: <answer>
    Citations: §3.2, §5.1        (or `Citations: none`)

- The LAST line that starts with `Answer:` counts (markdown emphasis, `>` and `#` before it are
  allowed, `Final answer:` too); earlier ones are drafts. The citations are those of the first
  `Citations:` after it (on the same line or a later one); a `Citations:` before the last answer is
  ignored, so no answer's citations can be borrowed by another.
- A scalar answer is the first non-empty line after the marker, with `*`/backtick emphasis, surrounding
  quotes and one trailing full stop removed (underscores are kept: `__next__` is a name). A JSON answer is the first JSON object after the marker.
- A cite key is an optional document letter, `§`, then an id (`§3.2`, `A§2.1`, `§json.dumps`); spaces
  around `§` and the HTML entity `&sect;` are accepted, text is NFKC-normalised first (full-width
  digits become ASCII). Anything else (`Section 3.2`, `3.2`, look-alike signs such as `⸹`) is not a
  citation. Keys are case-sensitive; a trailing `.`, `:` or `-` is dropped.

Guarantees: never raises for any `str`; only the last `TAIL_CHARS` characters are read (the answer
comes at the end), every regex is linear. Not here: comparing answers or scoring citations.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from typing import Any

from posttrain.verify.extract import clean_text

_ANSWER = re.compile(r"^[ \t>#*_-]*(?:final[ \t]+)?answer[ \t*_]*[:：]", re.IGNORECASE | re.MULTILINE)
_CITATIONS = re.compile(r"\bcitations?[ \t*_]*[:：]", re.IGNORECASE)
_CITE = re.compile(r"(?<![\w§])([A-Z]?)[ \t]*§[ \t]*([0-9A-Za-z_][\w.\-:#~]*)")
_EMPHASIS = " \t*`"
"""Stripped around a scalar answer; `_` is not (it would eat the ends of `__next__`)."""
_QUOTES = "\"'“”‘’"
MAX_ANSWER_CHARS = 4_000
"""A scalar answer longer than this is not an answer (a wall of text is never graded as one)."""


@dataclass(frozen=True)
class ParsedResponse:
    """What a response says: its answer block (None when there is no `Answer:` line) and its citations."""

    answer_block: str | None
    """Everything after the last `Answer:` marker up to its `Citations:` marker (or the end)."""
    citations: frozenset[str]
    """The cite keys of the citations line after the answer (empty for `none` or no line)."""


def parse_response(response: str) -> ParsedResponse:
    """Split `response` into its final answer block and the citations that belong to it."""
    text = clean_text(response)
    answer = _last_match(_ANSWER, text)
    if answer is None:
        return ParsedResponse(None, frozenset())
    cites = _CITATIONS.search(text, answer.end())
    if cites is None:
        return ParsedResponse(text[answer.end() :], frozenset())
    line = text[cites.end() :].split("\n", 1)[0]
    return ParsedResponse(text[answer.end() : cites.start()], cite_keys(line))


def cite_keys(text: str) -> frozenset[str]:
    """Every cite key written in `text`, canonical (`A§2.1`, `§3.2`)."""
    body = unicodedata.normalize("NFKC", text).replace("&sect;", "§")
    return frozenset(f"{prefix}§{ident.rstrip('.:-')}" for prefix, ident in _CITE.findall(body) if ident.rstrip(".:-"))


def scalar_answer(block: str | None) -> str | None:
    """The first non-empty line of an answer block, without emphasis, quotes and a final full stop."""
    if block is None:
        return None
    line = next((part for part in block.split("\n") if part.strip(_EMPHASIS)), "")
    line = line.strip(_EMPHASIS)
    if line[-1:] in (".", "!"):
        line = line[:-1].rstrip(_EMPHASIS)
    if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    if not line or len(line) > MAX_ANSWER_CHARS:
        return None
    return line


def json_answer(block: str | None) -> dict[str, Any] | None:
    """The first JSON object in an answer block (None when there is none)."""
    if block is None:
        return None
    start = block.find("{")
    if start < 0:
        return None
    try:
        value, _end = json.JSONDecoder().raw_decode(block, start)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    tail = deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None
