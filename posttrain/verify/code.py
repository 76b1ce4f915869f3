"""`CodeTestsVerifier` (`code_tests`): a program from the response run against the task's tests in the sandbox.

`Task.gold` (a dict, or its JSON text): `language` ("python"), `style` ("function" | "io"), `prompt`, `entry_point`, `tests`
(source defining `check(candidate)`), `setup` (run in the tests' namespace first) and, for style io,
`cases` ([{"stdin", "stdout"}]). The program is the response's last ```python (or bare ```) block, else
the whole text; with a prompt, code that defines `def <entry_point>` at top level is a full program and
runs after the prompt's other top-level statements (its imports and helpers), any other code is a body
appended to the prompt.

Style function: the program and the tests run under the trusted harness (`code_harness.py`, see there):
the verdict comes only from a line that carries a fresh random nonce and that only the harness parent
can write; the program's exit status and output are never read. Style io: the program runs once per
case with the case's stdin, and its stdout is compared here (trailing whitespace of each line and of the
whole ignored). Both run through one `SandboxPool` per verifier on the sandbox background loop, all the
items of `score_many` at once.

Failure attribution: a wrong answer, a syntax error, a crash, a timeout, running out of memory or a run
that leaves no verdict is a model failure (reward 0, or the fraction of tests passed with
`partial_credit`); a `sandbox_error`, a pool that cannot start, gold the harness cannot run, or a harness
bug is `Score.infra`. Details: `status`, `tests_passed`, `tests_total`, `tests` (one status per test),
`run` (the sandbox status of the run), `note`, and `stray_output_lines` when lines other than the
verdict reached the harness's verdict channel (only the harness writes there: a tamper sign).
Not here: the task families (`posttrain.tasks`), retries of infra scores (the reward stage).
"""

from __future__ import annotations

import ast
import asyncio
import functools
import marshal
import math
import os
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrain.sandbox import ExecResult, SandboxPool, SandboxSpec
from posttrain.sandbox.background import run_blocking
from posttrain.sandbox.lazy import LazyPool
from posttrain.types import Score, Task
from posttrain.verify.base import GoldError, gold_json
from posttrain.verify.code_harness import MARSHAL_VERSION
from posttrain.verify.configs import CodeTestsConfig

_FUTURE = "from __future__ import annotations\n"
HARNESS_SOURCE = _FUTURE + "".join(
    Path(__file__).with_name(name).read_text().replace(_FUTURE, "", 1)
    for name in ("code_zygote.py", "code_guard.py", "code_harness.py")
)
"""What runs in the sandbox: the zygote, the guard, then the harness (one `from __future__` line, at the top)."""
PYTHON = ("python3", "-I", "-S")
"""The sandbox's interpreter, isolated from the environment and without site-packages (the standard
library only; `site` alone costs a few milliseconds per response)."""
_COMPILE = "import marshal, sys; sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.read(), 'harness', 'exec')))"
HARNESS_SLACK_S = 5.0
"""Sandbox wall limit beyond the tests' budget: interpreter start and the verdict after a timeout."""
HARNESS_MEMORY_MB = 64
"""Memory added to `memory_mb` for the harness parent."""
MAX_OUTPUT_BYTES = 1 << 20
"""Output kept per stream: a verdict line, or an io case's whole expected stdout."""
BATCH_SLACK_S = 120.0
MAX_RUN_ITEMS = 8
"""Responses graded one after another in one sandbox run (the sandbox and the harness parent start once)."""
ITEM_SLACK_S = 1.0
"""Run wall time per response beyond its tests' budget: its interpreter start and the clean-up after it."""
CLEANED_DIRS = ("/tmp", "/dev/shm", ".")
"""Writable places in the sandbox where the harness removes what a response left before the next starts."""
POOL_SIZE = max(2, min(16, 2 * (os.cpu_count() or 1)))
"""Sandboxes per verifier: programs mostly wait on their own pipes, so twice the cores keeps them busy."""
_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_NO_VERDICT = {"timeout_wall": "timeout", "timeout_cpu": "timeout", "memory_limit": "memory_limit",
               "output_limit": "output_limit"}  # fmt: skip


def extract_code(response: str) -> str:
    """The last ```python (or bare ```) block of the response, else the whole text."""
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def assemble(prompt: str, entry_point: str, code: str) -> str:
    """The program to run: `code` alone, a full program after the prompt's other statements, or a body
    appended to the prompt."""
    if not prompt:
        return code
    if not _defines(code, entry_point):
        return prompt + code
    try:
        tree = ast.parse(prompt)
    except SyntaxError:  # a prompt that is not a whole program: keep only its import lines
        imports = [line for line in prompt.splitlines() if re.match(r"(import|from)\s", line)]
        return "\n".join(imports) + "\n" + code
    kept = [node for node in tree.body if not (isinstance(node, ast.FunctionDef) and node.name == entry_point)]
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n" + code


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return re.search(rf"^def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name for node in tree.body)


def normalize_output(text: str) -> str:
    """Trailing whitespace removed from every line and from the end."""
    return "\n".join(line.rstrip() for line in text.splitlines()).rstrip()


@functools.lru_cache(maxsize=4096)
def split_tests(tests: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """`check`'s body as one source per statement, and which of them are tests: a statement is a test
    when it holds an assert whose condition is not a constant (`assert True, "..."` lines are not).
    `GoldError` when there is no `check` or a statement cannot run on its own (e.g. `return`)."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError) as exc:
        raise GoldError(f"tests do not parse: {exc}") from None
    checks = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "check"]
    if not checks:
        raise GoldError("tests define no check(candidate)")
    statements, is_test = [], []
    for stmt in checks[-1].body:
        source = ast.unparse(stmt)
        try:
            compile(source, "<tests>", "exec")
        except SyntaxError as exc:
            raise GoldError(f"a statement of check cannot run on its own: {exc}") from None
        statements.append(source)
        asserts = [node for node in ast.walk(stmt) if isinstance(node, ast.Assert)]
        is_test.append(any(not isinstance(node.test, ast.Constant) for node in asserts))
    if not any(is_test):
        is_test = [True] * len(is_test)
    return tuple(statements), tuple(is_test)


@functools.lru_cache(maxsize=4096)
def prompt_for_tests(prompt: str, entry_point: str, tests: str, setup: str) -> str:
    """The prompt when the tests use a name it defines (a helper such as HumanEval's `poly`, or one of its
    imports), else "": the harness then skips running it (its imports, e.g. `typing`, cost time)."""
    try:
        defined = {name for node in ast.parse(prompt).body for name in _names_bound(node)} - {entry_point}
        used = {node.id for node in ast.walk(ast.parse(tests + "\n" + setup)) if isinstance(node, ast.Name)}
    except (SyntaxError, ValueError):
        return ""  # a prompt that is only the start of a program: the tests cannot need it
    return prompt if defined & used else ""


def _names_bound(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def parse_gold(task: Task) -> dict[str, Any]:
    gold = gold_json(task)
    if not isinstance(gold, dict) or gold.get("language", "python") != "python":
        raise GoldError("gold must be a dict for language python")
    style = gold.get("style")
    if style == "function":
        if not gold.get("entry_point") or not isinstance(gold.get("tests"), str):
            raise GoldError("style function needs entry_point and tests")
        split_tests(gold["tests"])
    elif style == "io":
        cases = gold.get("cases")
        if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
            raise GoldError("style io needs a non-empty list of cases")
    else:
        raise GoldError(f"unknown style {style!r}")
    return gold


def tests_score(status: str, tests: Sequence[str], partial_credit: bool, **details: Any) -> Score:
    """The grade of a run: 1.0 only when it ended normally with every test passed."""
    passed = sum(t == "pass" for t in tests)
    info = {"status": status, "tests_passed": passed, "tests_total": len(tests), "tests": list(tests), **details}
    if status == "ok" and tests and passed == len(tests):
        return Score.correct(**info)
    reward = passed / len(tests) if partial_credit and tests else 0.0
    return Score.wrong(reward, f"{status}: {passed}/{len(tests)} tests passed", **info)


class CodeTestsVerifier:
    """Grades code responses in a pool of sandboxes; `score_many` runs a whole batch concurrently."""

    def __init__(self, config: CodeTestsConfig, pool_size: int = POOL_SIZE) -> None:
        self.config = config
        self.pool_size = pool_size
        self.spec = SandboxSpec(timeout_s=config.timeout_s + HARNESS_SLACK_S,
                                memory_mb=config.memory_mb + HARNESS_MEMORY_MB,
                                max_output_bytes=MAX_OUTPUT_BYTES)  # fmt: skip
        self._pool = LazyPool(self._start)
        self._harness: list[str] = []
        """The harness's argv, set when the pool starts."""

    def score(self, task: Task, response: str) -> Score:
        return self.score_many([(task, response)])[0]

    def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        """One Score per (task, response), in order; the programs run concurrently in the pool."""
        if not items:
            return []
        per_run_s = MAX_RUN_ITEMS * (self.config.timeout_s + ITEM_SLACK_S) + HARNESS_SLACK_S
        rounds = math.ceil(len(items) / self.pool_size) + MAX_RUN_ITEMS  # + runs again after a sabotage
        try:
            return run_blocking(self._score_all(items), rounds * per_run_s + BATCH_SLACK_S)
        except Exception as exc:  # noqa: BLE001 - the pool could not start or the batch overran
            return [Score.infra(f"code verification failed: {type(exc).__name__}: {exc}"[:500]) for _ in items]

    def close(self) -> None:
        """Remove the pool's sandboxes (a later `score` starts a new pool)."""
        if self._pool.is_started:
            run_blocking(self._close(), 60.0)

    async def _close(self) -> None:
        await self._pool.close()

    async def _start(self) -> SandboxPool:
        """A started pool; the harness compiled once by the sandbox's own interpreter, so that each run
        loads bytecode instead of compiling the source again (about 3 ms per response). A sandbox that
        cannot do that could grade no program, so it raises (every score of the batch is infra)."""
        pool = await SandboxPool(self.spec, self.pool_size).start()
        compiled = await pool.run([*PYTHON, "-c", _COMPILE], stdin=HARNESS_SOURCE.encode())
        if not compiled.ok or not compiled.stdout or compiled.stdout_bytes != len(compiled.stdout):
            await pool.close()  # no program could be graded here: every score of the batch is infra
            raise RuntimeError(f"the sandbox's python3 cannot compile the harness: {compiled.status} "
                               f"{compiled.error} {compiled.stderr[-300:]!r}")  # fmt: skip
        loader = f"import marshal; exec(marshal.loads(bytes.fromhex('{compiled.stdout.hex()}')))"
        self._harness = [*PYTHON, "-c", loader]
        return pool

    async def _score_all(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
        pool = await self._pool.get()
        scores: list[Score | None] = [None] * len(items)
        jobs: list[_Job] = []
        io: list[Any] = []
        for index, (task, response) in enumerate(items):
            try:
                gold = parse_gold(task)
                code = extract_code(response)
                if gold["style"] == "io":
                    io.append(self._score_io_at(pool, scores, index, task, gold, code))
                else:
                    jobs.append(_Job(index, gold, assemble(gold.get("prompt", ""), gold["entry_point"], code)))
            except GoldError as exc:
                scores[index] = Score.infra(f"task {task.id}: {exc}")
            except Exception as exc:  # noqa: BLE001 - a bug here is never the model's fault
                scores[index] = Score.infra(f"code verifier bug on task {task.id}: {type(exc).__name__}: {exc}"[:500])
        await asyncio.gather(self._score_functions(pool, jobs, scores), *io)
        return [s if s is not None else Score.infra("code verifier: not graded") for s in scores]

    async def _score_io_at(self, pool: SandboxPool, scores: list[Score | None], index: int, task: Task,
                           gold: dict[str, Any], code: str) -> None:  # fmt: skip
        try:
            scores[index] = await self._score_io(pool, gold, code)
        except Exception as exc:  # noqa: BLE001 - a bug here is never the model's fault
            scores[index] = Score.infra(f"code verifier bug on task {task.id}: {type(exc).__name__}: {exc}"[:500])

    async def _score_functions(self, pool: SandboxPool, jobs: list[_Job], scores: list[Score | None]) -> None:
        """Function-style jobs in runs of up to `MAX_RUN_ITEMS`, spread over the pool; the responses a run
        did not start (its parent was killed or found tampering) go into the next round."""
        for _ in range(len(jobs) + 1):
            if not jobs:
                return
            size = min(MAX_RUN_ITEMS, math.ceil(len(jobs) / self.pool_size))
            runs = [jobs[k : k + size] for k in range(0, len(jobs), size)]
            try:
                outcomes = await asyncio.gather(*(self._score_run(pool, run) for run in runs))
            except Exception as exc:  # noqa: BLE001 - a bug here is never the model's fault
                for job in jobs:
                    scores[job.index] = Score.infra(f"code verifier bug: {type(exc).__name__}: {exc}"[:500])
                return
            jobs = []
            for graded, left in outcomes:
                for job, score in graded:
                    scores[job.index] = score
                jobs += left

    async def _score_run(self, pool: SandboxPool, jobs: list[_Job]) -> tuple[list[tuple[_Job, Score]], list[_Job]]:
        """One sandbox run over `jobs`: (graded jobs, jobs to run again)."""
        nonce = secrets.token_hex(16)
        stdin = f"{len(jobs)}\n".encode()
        for job in jobs:
            source = job.program.encode("utf-8", "surrogatepass")
            stdin += f"{len(source)}\n".encode() + source
        secret = {"nonce": nonce, "clean": list(CLEANED_DIRS), "items": [self._secret(job.gold) for job in jobs]}
        stdin += marshal.dumps(secret, MARSHAL_VERSION)
        timeout_s = len(jobs) * (self.config.timeout_s + ITEM_SLACK_S) + HARNESS_SLACK_S
        result = await pool.run(self._harness, stdin=stdin, timeout_s=timeout_s)
        lines = _harness_lines(result, nonce)
        stray = {"stray_output_lines": lines.stray} if lines.stray else {}
        graded: list[tuple[_Job, Score]] = []
        left: list[_Job] = []
        for position, job in enumerate(jobs):
            total = sum(split_tests(job.gold["tests"])[1])
            if position in lines.verdicts:
                score = self._verdict_score(lines.verdicts[position], result.status, stray)
                if lines.tampered is not None and lines.tampered[0] == position:
                    score = tests_score("tampered", ["error"] * total, False, run=result.status,
                                        note=lines.tampered[1], **stray)  # fmt: skip
            elif result.status == "sandbox_error":
                score = Score.infra(f"sandbox error: {result.error}"[:500])
            elif position in lines.started:
                status = _NO_VERDICT.get(result.status, "no_verdict")
                score = tests_score(status, ["error"] * total, self.config.partial_credit, run=result.status, **stray)
            elif not lines.started:  # no program ran: nothing here can be the model's doing
                score = Score.infra(f"the code harness started no program: {result.status} {result.stderr[-300:]!r}"[:500])
            else:
                left.append(job)
                continue
            graded.append((job, score))
        return graded, left

    def _secret(self, gold: dict[str, Any]) -> dict[str, Any]:
        statements, is_test = split_tests(gold["tests"])
        setup = gold.get("setup") or ""
        return {"setup": setup, "tests": gold["tests"], "statements": list(statements), "is_test": list(is_test),
                "entry_point": gold["entry_point"], "budget_s": self.config.timeout_s,
                "prompt": prompt_for_tests(gold.get("prompt", ""), gold["entry_point"], gold["tests"], setup)}  # fmt: skip

    def _verdict_score(self, verdict: tuple[str, list[str], str], run: str, extra: dict[str, Any]) -> Score:
        status, tests, note = verdict
        if status == "harness_error":
            return Score.infra(f"code harness: {note}"[:500])
        return tests_score(status, tests, self.config.partial_credit, run=run, note=note, **extra)

    async def _score_io(self, pool: SandboxPool, gold: dict[str, Any], code: str) -> Score:
        prompt = gold.get("prompt", "")
        program = code if not prompt or prompt.strip() in code else prompt + code
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout_s
        tests: list[str] = []
        for case in gold["cases"]:
            remaining = deadline - loop.time()
            if remaining <= 0.05 or (tests and tests[-1] != "pass" and not self.config.partial_credit):
                tests.append("not_run")
                continue
            stdin = str(case.get("stdin", "")).encode()
            result = await pool.run([*PYTHON, "main.py"], files={"main.py": program}, stdin=stdin,
                                    timeout_s=remaining)  # fmt: skip
            if result.status == "sandbox_error":
                return Score.infra(f"sandbox error: {result.error}"[:500])
            tests.append(_case_status(result, str(case.get("stdout", ""))))
        failures = [t for t in tests if t not in ("pass", "fail", "not_run")]
        return tests_score(failures[0] if failures else "ok", tests, self.config.partial_credit)


def _case_status(result: ExecResult, expected: str) -> str:
    if result.status != "ok":
        return "timeout" if result.status.startswith("timeout") else result.status
    if result.stdout_bytes > len(result.stdout):
        return "fail"  # cut to head and tail: longer than any expected output we keep
    return "pass" if normalize_output(result.stdout.decode("utf-8", "replace")) == normalize_output(expected) else "fail"


@dataclass
class _Job:
    index: int
    gold: dict[str, Any]
    program: str


@dataclass
class _Lines:
    """What one run's harness wrote on its verdict channel (lines carrying the run's nonce)."""

    started: set[int] = field(default_factory=set)
    verdicts: dict[int, tuple[str, list[str], str]] = field(default_factory=dict)
    """Per response: (status, per-test statuses, note)."""
    tampered: tuple[int, str] | None = None
    """(the response whose processes changed the sandbox, what changed)."""
    stray: int = 0
    """Non-empty lines without the nonce: only the harness parent writes there (the programs' stdout is
    /dev/null), so such a line was written by a program that reached the channel some other way (e.g.
    through /proc), a tamper sign in `details["stray_output_lines"]` of every response of the run."""


def _harness_lines(result: ExecResult, nonce: str) -> _Lines:
    lines = _Lines()
    for line in result.stdout.decode("ascii", "replace").splitlines():
        fields = line.split(" ")
        if fields[0] != nonce or len(fields) < 3:
            lines.stray += bool(line.strip())
        elif fields[1] == "start" and fields[2].isdigit():
            lines.started.add(int(fields[2]))
        elif fields[1] == "tampered" and len(fields) == 4:
            lines.tampered = (int(fields[2]), _unhex(fields[3]))
        elif len(fields) == 5 and fields[1].isdigit():
            tests = [] if fields[3] == "-" else fields[3].split(",")
            lines.verdicts[int(fields[1])] = (fields[2], tests, _unhex(fields[4]))
        else:
            lines.stray += 1
    return lines


def _unhex(text: str) -> str:
    try:
        return "" if text == "-" else bytes.fromhex(text).decode("utf-8", "replace")
    except ValueError:
        return ""
