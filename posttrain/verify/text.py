"""Text-matching verifiers: exact, normalised string and numeric-with-tolerance.

Gold convention: `task.gold` is the reference answer - a string or a number - or a list of acceptable
references; a response passes when its extracted answer matches any of them. Missing or unusable gold is
an infra failure (the task's fault), a missing or different answer a model failure. Numbers are parsed
exactly (integers, decimals, `3/4`, `\\frac{3}{4}`, thousands separators `1,234`, signs, `$`/`%`
decorations, short scientific notation) and compared exactly first, then within the tolerances.
Not here: symbolic equivalence (see `posttrain.verify.math_equiv`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.configs import ExactConfig, ExtractMode, NormalizedConfig, NumericConfig
from posttrain.verify.extract import clean_text, extract_answer, last_number

MAX_NUMBER_CHARS = 200
"""Longer strings are not parsed as numbers (bounds big-integer work)."""

_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_RATIO = re.compile(r"([+-]?\d+)\s*/\s*(\d+)")
_LATEX_FRAC = re.compile(r"(-?)\\[dt]?frac\{\s*([+-]?\d+)\s*\}\{\s*(\d+)\s*\}")
_TEXT_WRAPPER = re.compile(r"\\(?:text|mathrm|textbf)\{([^{}]*)\}")
_TRIM = " \t\n.,;:!?\"'`*$"


def gold_references(task: Task) -> list[str]:
    """The task's acceptable reference answers as strings."""
    gold = task.gold
    items = list(gold) if isinstance(gold, list | tuple) else [gold]
    refs = [str(item) for item in items if isinstance(item, str | int | float) and not isinstance(item, bool)]
    if not refs or len(refs) != len(items):
        raise GoldError(f"gold must be a string, a number or a list of them, got {type(gold).__name__}")
    return refs


def parse_number(text: str) -> Fraction | None:
    """`text` as an exact number, or None when it is not one number."""
    body = text.strip().replace("\\!", "").replace("\\,", "").replace("\\$", "").replace("\\%", "")
    body = body.strip("$ ").removesuffix("%").strip()
    if len(body) > MAX_NUMBER_CHARS:
        return None
    if _THOUSANDS.fullmatch(body):
        body = body.replace(",", "")
    latex = _LATEX_FRAC.fullmatch(body)
    ratio = _RATIO.fullmatch(body)
    try:
        if latex:
            value = Fraction(int(latex.group(2)), int(latex.group(3)))
            return -value if latex.group(1) else value
        if ratio:
            return Fraction(int(ratio.group(1)), int(ratio.group(2)))
        return Fraction(body) if _DECIMAL.fullmatch(body) else None
    except (ValueError, ZeroDivisionError):
        return None


def numbers_match(a: Fraction, b: Fraction, rel_tol: float, abs_tol: float) -> bool:
    """Exact equality, else closeness of the float values within the tolerances."""
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:
        return False


def normalize(text: str, case_sensitive: bool = False) -> str:
    """NFKC, `\\text{}` unwrapped, whitespace collapsed, surrounding punctuation trimmed, case folded."""
    body = _TEXT_WRAPPER.sub(r"\1", unicodedata.normalize("NFKC", text))
    body = " ".join(body.split()).strip(_TRIM)
    return body if case_sensitive else body.casefold()


def _missing(mode: str) -> Score:
    return Score.wrong(message=f"no answer found (extract={mode})")


def _match(task: Task, response: str, mode: ExtractMode, key: Callable[[str], str]) -> Score:
    """Passes when `key` of the extracted answer equals `key` of a reference."""
    refs = {key(ref) for ref in gold_references(task)}
    answer = extract_answer(response, mode)
    if answer is None:
        return _missing(mode)
    if key(answer) in refs:
        return Score.correct(extracted=answer)
    return Score.wrong(message="answer differs from the reference", extracted=answer[:200])


@dataclass(frozen=True)
class ExactVerifier:
    """Passes when the extracted answer equals a reference after stripping whitespace."""

    config: ExactConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        return _match(task, response, self.config.extract, str.strip)


@dataclass(frozen=True)
class NormalizedVerifier:
    """Passes when the extracted answer equals a reference after `normalize`."""

    config: NormalizedConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        sensitive = self.config.case_sensitive
        return _match(task, response, self.config.extract, lambda text: normalize(text, sensitive))


@dataclass(frozen=True)
class NumericVerifier:
    """Passes when the response's number equals a reference number within the tolerances.

    The number is the extracted answer if it parses, else the last number inside it, else the last
    number in the response."""

    config: NumericConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        refs = [parse_number(ref) for ref in gold_references(task)]
        if any(ref is None for ref in refs):
            raise GoldError(f"gold {task.gold!r} is not a number")
        value = self._number_in(response)
        if value is None:
            return Score.wrong(message="no number found")
        cfg = self.config
        if any(numbers_match(value, ref, cfg.rel_tol, cfg.abs_tol) for ref in refs if ref is not None):
            return Score.correct(extracted=str(value))
        return Score.wrong(message="number differs from the reference", extracted=str(value))

    def _number_in(self, response: str) -> Fraction | None:
        answer = extract_answer(response, self.config.extract)
        candidates = [answer, last_number(answer)] if answer is not None else []
        candidates.append(last_number(clean_text(response)))
        for candidate in candidates:
            value = parse_number(candidate) if candidate is not None else None
            if value is not None:
                return value
        return None
