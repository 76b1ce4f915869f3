"""Answer extraction: pull the final answer out of a free-form response.

Modes (`ExtractMode` in `posttrain.verify.configs`):

- `none`: the whole response, stripped.
- `boxed`: the content of the last balanced `\\boxed{...}` (or `\\fbox{...}`); nested braces are fine.
- `answer_tag`: the last `<answer>...</answer>` block, else the final-answer statement (`answer_line`).
- `answer_line`: the rest of the line after the last `Answer:` or `... answer ... is` ("The answer is
  18.", "The final answer to the problem is 7."); markdown emphasis, surrounding quotes and one trailing
  full stop or exclamation mark are dropped. Only the last statement counts, and only its own line, so
  a response that states several candidates is graded on one of them.
- `hashes`: the rest of the line after the last `####` (GSM8K style).
- `last_number`: the last number-looking token (`-1,234.5`, `3/4`, `.5`).
- `final_line`: the last non-empty line.
- `auto`: `boxed`, then `answer_tag`, then `hashes`, then `final_line` - the first that finds something.
- `answer_block`: `<answer>` block, then `boxed`, then `answer_line`, then the whole response (for
  multi-line answers; small instruct models state a final answer in prose far more often than in tags).

Guarantees: never raises for any `str`; work is bounded - only the last `TAIL_CHARS` characters of a
response are examined (answers come at the end), every regex is linear (no nested quantifiers), and lone
surrogates are replaced by U+FFFD so the result is always encodable as UTF-8. Returns None when the mode
finds nothing. Not here: comparing answers (the verifiers do that).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from posttrain.verify.configs import ExtractMode

TAIL_CHARS = 16_384
"""Only this many trailing characters of a response are examined."""

_BOXED_OR_BRACE = re.compile(r"\\(?:boxed|fbox)\s*\{|[{}]")
_BOXED_BARE = re.compile(r"\\boxed ([^\s$]+)")
_OPEN_TAG = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</answer>", re.IGNORECASE)
# "Answer:" or "answer <up to 48 characters within the sentence> is"; the bounded gap keeps it linear.
_ANSWER_LINE = re.compile(r"answer(?:[\s*_]*[:：]|\b[^\n.:：]{0,48}?\bis\b[\s*_]*[:：]?)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_EMPHASIS = " \t*_`"
_QUOTES = "\"'“”‘’"


def clean_text(text: str) -> str:
    """The bounded tail of `text` with lone surrogates replaced, so later steps are cheap and safe."""
    if not isinstance(text, str):
        return ""
    tail = text[-TAIL_CHARS:]
    try:
        tail.encode("utf-8")
    except UnicodeEncodeError:
        tail = tail.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return tail


def last_boxed(text: str) -> str | None:
    """Content of the last balanced `\\boxed{...}` in `text`, in one linear pass."""
    found: str | None = None
    stack: list[int] = []  # per open brace: content start if it opens a \boxed, else -1
    for match in _BOXED_OR_BRACE.finditer(text):
        token = match.group()
        if token == "}":
            if stack:
                start = stack.pop()
                if start >= 0:
                    found = text[start : match.start()]
        else:
            stack.append(-1 if token == "{" else match.end())
    if found is None:
        bare = _last_match(_BOXED_BARE, text)
        return bare.group(1) if bare else None
    return found.strip()


def answer_tag(text: str) -> str | None:
    """The last `<answer>` block, else the final-answer statement (`answer_line`)."""
    block = tag_block(text)
    return block if block is not None else answer_line(text)


def answer_line(text: str) -> str | None:
    """The rest of the line after the last `Answer:` or `answer ... is`, without emphasis, quotes and
    a trailing full stop."""
    line = _last_match(_ANSWER_LINE, text)
    if line is None:
        return None
    rest = text[line.end() :].split("\n", 1)[0].strip(_EMPHASIS)
    if rest[-1:] in (".", "!"):
        rest = rest[:-1].rstrip(_EMPHASIS)
    if len(rest) >= 2 and rest[0] in _QUOTES and rest[-1] in _QUOTES:
        rest = rest[1:-1]
    return rest.strip() or None


def tag_block(text: str) -> str | None:
    """The content of the last `<answer>...</answer>` block (case-insensitive), in linear time."""
    close = _last_match(_CLOSE_TAG, text)
    if close is None:
        return None
    opening = _last_match(_OPEN_TAG, text, close.start())
    if opening is None:
        return None
    return text[opening.end() : close.start()].strip()


def after_hashes(text: str) -> str | None:
    """The rest of the line after the last `####`."""
    index = text.rfind("####")
    if index < 0:
        return None
    rest = text[index + 4 :].split("\n", 1)[0].strip()
    return rest or None


def last_number(text: str) -> str | None:
    """The last number-looking token, thousands separators and sign included."""
    match = _last_match(_NUMBER, text)
    return match.group().rstrip(",") if match else None


def final_line(text: str) -> str | None:
    """The last non-empty line, stripped."""
    stripped = text.rstrip()
    if not stripped:
        return None
    return stripped.rsplit("\n", 1)[-1].strip() or None


def whole(text: str) -> str | None:
    """The whole text, stripped (None when empty)."""
    return text.strip() or None


def _last_match(pattern: re.Pattern[str], text: str, end: int | None = None) -> re.Match[str] | None:
    tail = deque(pattern.finditer(text, 0, len(text) if end is None else end), maxlen=1)
    return tail[0] if tail else None


def _first_of(*steps: Callable[[str], str | None]) -> Callable[[str], str | None]:
    def run(text: str) -> str | None:
        for step in steps:
            found = step(text)
            if found is not None:
                return found
        return None

    return run


_MODES: dict[str, Callable[[str], str | None]] = {
    "none": whole,
    "boxed": last_boxed,
    "answer_tag": answer_tag,
    "answer_line": answer_line,
    "hashes": after_hashes,
    "last_number": last_number,
    "final_line": final_line,
    "auto": _first_of(last_boxed, answer_tag, after_hashes, final_line),
    "answer_block": _first_of(tag_block, last_boxed, answer_line, whole),
}


def extract_answer(response: str, mode: ExtractMode = "auto") -> str | None:
    """The answer in `response` under `mode`, or None when the mode finds nothing. Never raises."""
    return _MODES[mode](clean_text(response))
