"""A stand-in for the sandboxed `code_tests` verifier: plain `exec` in a subprocess, no isolation.

It follows the contract of `posttrain.verify.code` (docs/code.md): the last ```python block, else the
raw text; a body is appended to a non-empty prompt, a whole function runs after the prompt's import
lines; `setup` then the tests run in a namespace of their own and `check(candidate)` is called; io
cases compare stdout with trailing whitespace stripped per line. For trusted gold code in tests only:
it checks that families' gold is right before (and independently of) the real verifier.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from posttrain.types import Score, Task

DRIVER = r'''
import json, re, subprocess, sys

def extract(response):
    blocks = re.findall(r"```(?:python)?[^\n]*\n(.*?)```", response, re.S)
    return blocks[-1] if blocks else response

def program(gold, code):
    prompt = gold["prompt"]
    if not prompt:
        return code
    if re.search(rf"^def {re.escape(gold['entry_point'])}\s*\(", code, re.M):
        imports = [l for l in prompt.splitlines() if l.startswith(("import ", "from "))]
        return "\n".join(imports) + "\n" + code
    return prompt + code

def normalise(text):
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()

def run(gold, response):
    code = extract(response)
    if gold["style"] == "io":
        for case in gold["cases"]:
            done = subprocess.run([sys.executable, "-c", code], input=case["stdin"], capture_output=True,
                                  text=True, timeout=10)
            assert normalise(done.stdout) == normalise(case["stdout"]), (done.stdout, done.stderr)
        return
    namespace = {"__name__": "solution"}
    exec(program(gold, code), namespace)
    tests = {"__name__": "tests"}
    exec(gold["setup"], tests)
    exec(gold["tests"], tests)
    tests["check"](namespace[gold["entry_point"]])

results = []
for gold, response in json.load(sys.stdin):
    try:
        run(gold, response)
        results.append("pass")
    except BaseException as exc:
        results.append(f"{type(exc).__name__}: {exc}"[:300])
print(json.dumps(results))
'''


def run_responses(pairs: list[tuple[Any, str]]) -> list[str]:
    """'pass' or the failure, per (gold, response), each run in a fresh namespace of one subprocess."""
    done = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(pairs), capture_output=True, text=True,
                          timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout)


class ExecCodeVerifier:
    """Scores one response by `run_responses`: 1 when every test passes, else 0 with the failure."""

    def score(self, task: Task, response: str) -> Score:
        (result,) = run_responses([(task.gold, response)])
        return Score.correct() if result == "pass" else Score.wrong(message=result)


def make_exec_code_verifier() -> ExecCodeVerifier:
    return ExecCodeVerifier()
