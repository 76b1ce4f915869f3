"""Code records of JSONL datasets (`format: humaneval | mbpp | io`) turned into code-task gold.

Each parser takes one decoded JSON object and returns (prompt, gold, answer), raising ValueError with
the reason (the JSONL loader prefixes `file:line:`). Shapes:
- `humaneval`: `prompt`, `entry_point`, `test` (defines `check(candidate)`), optional
  `canonical_solution` (see `humaneval.py`).
- `mbpp`: `text` (or `prompt`), `test_list` (asserts calling the function by name), optional `code`
  (the reference solution), `test_setup_code`, `entry_point` (default: the first function `code`
  defines that the asserts call, else the first non-builtin name they call). The asserts become
  `check(candidate)`; the prompt shows the first one, so the function's name and call shape are known.
- `io`: `statement` (or `prompt`), `cases` (a non-empty list of `{"input": str, "output": str}`),
  optional `solution` (a whole program). The prompt shows the first case.
A record without a reference solution gets no `answer` (validation reports it). Not here: reading files.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from posttrain.tasks.families.code.gold import fenced, function_gold, io_gold, mbpp_check
from posttrain.tasks.families.code.humaneval import humaneval_fields

MBPP_INSTRUCTION = "Reply with the function in a ```python block."
IO_INSTRUCTION = "Read the input from stdin and print the answer. Reply with the whole program in a ```python block."

Fields = tuple[str, dict[str, Any], str | None]


def _text(obj: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise ValueError(f"missing field {' or '.join(repr(k) for k in keys)}")


def _optional_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} is not a string")
    return value.replace("\r\n", "\n")


def _called_names(source: str) -> list[str]:
    """Names called in `source`, in order of appearance."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"test_list does not parse: {exc.msg} (line {exc.lineno})") from None
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
    calls.sort(key=lambda node: (node.lineno, node.col_offset))
    return list(dict.fromkeys(node.func.id for node in calls if isinstance(node.func, ast.Name)))


def _defined_functions(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"code does not parse: {exc.msg} (line {exc.lineno})") from None
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _mbpp_entry_point(obj: dict[str, Any], asserts: list[str], code: str | None) -> str:
    given = _optional_text(obj, "entry_point")
    if given is not None:
        return given.strip()
    called = _called_names("\n".join(asserts))
    defined = _defined_functions(code) if code is not None else set()
    candidates = [n for n in called if n in defined] or [n for n in called if not hasattr(builtins, n)]
    if not candidates:
        raise ValueError("cannot tell which function the tests call: give 'entry_point'")
    return candidates[0]


def mbpp_fields(obj: dict[str, Any]) -> Fields:
    text = _text(obj, "text", "prompt")
    asserts = obj.get("test_list")
    if not isinstance(asserts, list) or not asserts or not all(isinstance(a, str) and a.strip() for a in asserts):
        raise ValueError("'test_list' must be a non-empty list of assert statements")
    code = _optional_text(obj, "code")
    entry_point = _mbpp_entry_point(obj, asserts, code)
    gold = function_gold(entry_point, mbpp_check(entry_point, asserts), setup=_optional_text(obj, "test_setup_code") or "")
    prompt = f"{text.strip()}\nYour function must pass: {asserts[0].strip()}\n{MBPP_INSTRUCTION}"
    return prompt, gold, fenced(code) if code is not None else None


def _cases(obj: dict[str, Any]) -> list[tuple[str, str]]:
    cases = obj.get("cases")
    if not isinstance(cases, list) or not cases:
        raise ValueError("'cases' must be a non-empty list of {\"input\": str, \"output\": str}")
    out = []
    for number, case in enumerate(cases):
        if not isinstance(case, dict) or not all(isinstance(case.get(k), str) for k in ("input", "output")):
            raise ValueError(f"cases[{number}] must be {{\"input\": str, \"output\": str}}")
        out.append((case["input"], case["output"]))
    return out


def io_fields(obj: dict[str, Any]) -> Fields:
    statement = _text(obj, "statement", "prompt")
    cases = _cases(obj)
    solution = _optional_text(obj, "solution")
    stdin, stdout = cases[0]
    prompt = f"{statement.strip()}\nExample input:\n{stdin.rstrip()}\nExample output:\n{stdout.rstrip()}\n{IO_INSTRUCTION}"
    return prompt, io_gold(cases), fenced(solution) if solution is not None else None


CODE_FORMATS = {"humaneval": humaneval_fields, "mbpp": mbpp_fields, "io": io_fields}
"""JSONL format name -> parser of one record."""
