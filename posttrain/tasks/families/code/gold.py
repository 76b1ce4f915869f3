"""The gold record of a `code_tests` task, built one way for every code source.

`Task.gold` of a code domain is a JSON dict (the contract with `posttrain.verify.code`):
`{"language": "python", "style": "function", "prompt", "entry_point", "tests", "setup"}` where `tests`
defines `check(candidate)` that raises on failure, or `{"language": "python", "style": "io", "prompt": "",
"cases": [{"stdin", "stdout"}]}` for whole programs reading stdin. `Task.answer` is a response scoring 1:
code in a ```python block. Guarantees: every builder returns JSON-serialisable data; `asserts_check`
writes literal values with `repr`, so a test reads the same as the value the reference computed.
Not here: running anything (the verifier does, in the sandbox).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LANGUAGE = "python"
"""The one language code tasks are written in."""


def fenced(code: str) -> str:
    """`code` as a response: one ```python block."""
    return f"```python\n{code.strip(chr(10))}\n```"


def function_gold(entry_point: str, tests: str, prompt: str = "", setup: str = "") -> dict[str, Any]:
    """Gold of a function task: `tests` defines `check(candidate)`, called with `entry_point`."""
    return {"language": LANGUAGE, "style": "function", "prompt": prompt, "entry_point": entry_point,
            "tests": tests, "setup": setup}  # fmt: skip


def io_gold(cases: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Gold of a whole-program task: each case is (stdin, expected stdout)."""
    return {"language": LANGUAGE, "style": "io", "prompt": "",
            "cases": [{"stdin": stdin, "stdout": stdout} for stdin, stdout in cases]}  # fmt: skip


def asserts_check(call_results: Sequence[tuple[str, Any]]) -> str:
    """`check(candidate)` asserting `candidate(<args>) == <value>` for each (argument source, value)."""
    lines = [f"    assert candidate({args}) == {value!r}" for args, value in call_results]
    return "def check(candidate):\n" + "\n".join(lines) + "\n"


def mbpp_check(entry_point: str, asserts: Sequence[str]) -> str:
    """MBPP's top-level asserts as `check(candidate)`: the asserts call `entry_point` by name, so the
    candidate is bound to that name first."""
    body = "\n".join(f"    {line}" for assert_line in asserts for line in assert_line.strip().splitlines())
    return f"def check(candidate):\n    {entry_point} = candidate\n{body}\n"
