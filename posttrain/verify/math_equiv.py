"""Mathematical equivalence via math-verify (symbolic and numeric: `\\frac{1}{2}` equals `0.5`).

math-verify bounds its work with `signal.alarm`, which only works in a process's main thread, so
`MathConfig.needs_main_thread` is true and the `Grader` never scores it inline off the main thread (it
sends such items to a worker process, which scores in its own main thread). Called directly from
another thread, `MathVerifier.score` cannot set its alarm and returns an infra failure saying so.

Gold convention: `task.gold` is the reference answer as LaTeX or plain maths (`\\frac{1}{2}`, `x^2+1`,
`42`), a number, or a list of acceptable references; bare references are wrapped in `$...$` before
parsing. A gold that math-verify cannot parse is an infra failure; a response with nothing parseable is
a model failure. Only the last `TAIL_CHARS` characters of a response are parsed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, guarded
from posttrain.verify.configs import MathConfig
from posttrain.verify.extract import clean_text
from posttrain.verify.text import gold_references

_MATH_MARKERS = ("$", "\\boxed", "\\(", "\\[")


def _wrap(reference: str) -> str:
    return reference if any(marker in reference for marker in _MATH_MARKERS) else f"${reference}$"


@dataclass(frozen=True)
class MathVerifier:
    """Passes when math-verify finds the response's final answer equivalent to a reference."""

    config: MathConfig

    @guarded
    def score(self, task: Task, response: str) -> Score:
        if threading.current_thread() is not threading.main_thread():
            return Score.infra("math-verify needs the main thread; grade through a Grader")
        from math_verify import parse, verify

        budget_s = max(1, math.ceil(self.config.timeout_s))
        golds = [self._parse_gold(parse, ref, budget_s) for ref in gold_references(task)]
        predicted = parse(clean_text(response), parsing_timeout=budget_s)
        if not predicted:
            return Score.wrong(message="no mathematical answer found")
        if any(verify(gold, predicted, timeout_seconds=budget_s) for gold in golds):
            return Score.correct(extracted=str(predicted[-1])[:200])
        return Score.wrong(message="not equivalent to the reference", extracted=str(predicted[-1])[:200])

    @staticmethod
    def _parse_gold(parse: Any, reference: str, budget_s: int) -> Any:
        try:
            parsed = parse(
                _wrap(reference), fallback_mode="no_fallback", parsing_timeout=budget_s, raise_on_error=True
            )
        except BaseException as exc:  # math-verify's timeout derives from BaseException
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            raise GoldError(f"math-verify cannot parse gold {reference!r}: {type(exc).__name__}") from None
        if not parsed:
            raise GoldError(f"math-verify finds no maths in gold {reference!r}")
        return parsed
