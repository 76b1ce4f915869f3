"""The `code_tests` verifier: response handling, the harness's plain-data encoding, grading in the
sandbox (function and io styles), failure attribution, and batching through the Grader."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import pytest

from posttrain.sandbox import ExecResult
from posttrain.sandbox.background import run_blocking
from posttrain.sandbox.spec import sandbox_error
from posttrain.types import ErrorKind, Score, Task
from posttrain.verify import Grader
from posttrain.verify.base import GoldError, score_many_safely
from posttrain.verify.code import (
    MAX_RUN_ITEMS,
    CodeTestsVerifier,
    assemble,
    extract_code,
    normalize_output,
    prompt_for_tests,
    split_tests,
)
from posttrain.verify.code_harness import pack, unpack
from posttrain.verify.configs import CodeTestsConfig, ExactConfig
from posttrain.verify.executor import ExecutorConfig
from tests.verify.code_fixtures import (
    SAMPLE,
    function_task,
    humaneval_task,
    io_task,
    problems,
    requires_bwrap,
    verifier,  # noqa: F401 - a fixture
)

TESTS = """
def check(candidate):
    assert True, "not a test"
    assert candidate(1) == 2
    x = candidate(2)
    assert x == 3
    assert candidate(3) == 4
"""


# ------------------------------------------------------------------ pure parts
def test_the_last_python_block_is_the_program() -> None:
    response = "first\n```python\nA\n```\ntext\n```\nB\n```\nend"
    assert extract_code(response) == "B\n"
    assert extract_code("```py\n    return 1\n```") == "    return 1\n"  # indentation kept (a body)
    assert extract_code("def f(): pass") == "def f(): pass"


def test_a_body_is_appended_and_a_full_program_replaces_the_stub() -> None:
    prompt = "import math\n\ndef helper(x):\n    return x\n\ndef f(x):\n    \"\"\"doc\"\"\"\n"
    assert assemble(prompt, "f", "    return 1\n") == prompt + "    return 1\n"
    program = assemble(prompt, "f", "def f(x):\n    return helper(x)\n")
    assert "import math" in program and "def helper" in program and program.count("def f(") == 1
    assert assemble("", "f", "print(1)") == "print(1)"


def test_output_comparison_ignores_trailing_whitespace_only() -> None:
    assert normalize_output("1  \n2\t\n\n") == normalize_output("1\n2")
    assert normalize_output(" 1\n2") != normalize_output("1\n2")


def test_results_round_trip_as_exact_builtin_types() -> None:
    value = [1, 2.5, float("inf"), "s", None, True, (1, (2,)), {"k": {1, 2}}, frozenset({3}), b"\x00", 1j]
    decoded = unpack(pack(value))
    assert decoded == value
    assert [type(v) for v in decoded] == [type(v) for v in value]
    assert type(decoded[6]) is tuple and type(decoded[7]["k"]) is set


def test_objects_that_are_not_plain_data_are_refused() -> None:
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    deep: list[object] = []
    for _ in range(500):
        deep = [deep]
    for value in (Liar(0), [Liar(1)], {"k": object()}, iter([]), deep):
        with pytest.raises(ValueError):
            pack(value)
    import marshal

    for data in (marshal.dumps(compile("1", "x", "eval")), marshal.dumps([...]), b"\xff\xfe", b""):
        with pytest.raises((ValueError, EOFError, TypeError)):
            unpack(data)


def test_check_is_split_into_statements_and_constant_asserts_are_not_tests() -> None:
    statements, is_test = split_tests(TESTS)
    assert statements[1] == "assert candidate(1) == 2"
    assert is_test == (False, True, False, True, True)
    for tests in ("assert True", "def check(candidate):\n    return\n", "def check(:"):
        with pytest.raises(GoldError):
            split_tests(tests)


def test_the_prompt_is_sent_only_when_the_tests_use_what_it_defines() -> None:
    prompt = "import math\nfrom typing import List\n\ndef poly(xs):\n    return 0\n\ndef f(xs):\n    \"\"\"d\"\"\"\n"
    assert prompt_for_tests(prompt, "f", "def check(candidate):\n    assert candidate([1])\n", "") == ""
    assert prompt_for_tests(prompt, "f", "def check(candidate):\n    assert poly(candidate([1]))\n", "") == prompt
    assert prompt_for_tests(prompt, "f", "def check(c):\n    assert math.isclose(c(1), 1)\n", "") == prompt


def test_a_batch_verifier_that_breaks_its_contract_gives_infra_scores() -> None:
    class Short:
        def score(self, task: Task, response: str) -> Score:
            return Score.correct()

        def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
            return [Score.correct()]

    scores = score_many_safely(Short(), [(function_task(TESTS), "a"), (function_task(TESTS), "b")])
    assert [s.error for s in scores] == [ErrorKind.INFRA, ErrorKind.INFRA]


def test_bad_gold_is_an_infra_failure_before_anything_runs() -> None:
    unstarted = CodeTestsVerifier(CodeTestsConfig())
    for gold in ({"style": "function", "entry_point": "f", "tests": "assert True"},  # no check
                 {"style": "io", "cases": []}, {"style": "other"}, "not json"):  # fmt: skip
        task = Task(id="g#0", domain_id="code/test", prompt="q", gold=gold)
        assert unstarted.score(task, "def f(): pass").error is ErrorKind.INFRA


def test_a_runs_lines_decide_who_is_graded_how(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sandbox error: infra. No program started: infra (nothing of the model's ran). Started without a
    verdict: the model's, whatever ended the run. Not started after one that was: run again. Tampered:
    the response named scores 0 as the model's even with a passing verdict."""
    import posttrain.verify.code as code

    nonce = "ab" * 16
    monkeypatch.setattr(code.secrets, "token_hex", lambda size: nonce)

    class FakePool:
        def __init__(self, result: ExecResult) -> None:
            self.result = result

        async def run(self, *args: object, **kwargs: object) -> ExecResult:
            return self.result

    unstarted = CodeTestsVerifier(CodeTestsConfig())
    gold = function_task(TESTS).gold
    jobs = [code._Job(i, gold, "def f(x): return x + 1") for i in range(3)]

    def grade(result: ExecResult) -> tuple[list[Score], int]:
        graded, left = asyncio.run(unstarted._score_run(FakePool(result), jobs))  # type: ignore[arg-type]
        return [score for _, score in graded], len(left)

    def ran(status: str, *lines: str, **fields: object) -> ExecResult:
        return ExecResult(status=status, stdout="".join(line + "\n" for line in lines).encode(), **fields)  # type: ignore[arg-type]

    scores, left = grade(sandbox_error("supervisor died"))
    assert [s.error for s in scores] == [ErrorKind.INFRA] * 3 and left == 0
    forged = "0123456789abcdef0123456789abcdef 0 ok pass,pass,pass -"
    scores, left = grade(ran("ok", forged))
    assert [s.error for s in scores] == [ErrorKind.INFRA] * 3 and left == 0
    verdict = f"{nonce} 0 ok pass,pass,pass -"
    for status, extra in (("timeout_wall", {}), ("memory_limit", {}), ("runtime_error", {"signal": 9}), ("ok", {})):
        scores, left = grade(ran(status, forged, f"{nonce} start 0", verdict, f"{nonce} start 1", **extra))
        assert scores[0].passed and left == 1
        assert (scores[1].reward, scores[1].error, scores[1].details["tests_total"]) == (0.0, ErrorKind.MODEL, 3)
        assert scores[1].details["stray_output_lines"] == 1  # the forged line: not this run's nonce
    tampered = f"{nonce} tampered 0 {b'rlimits'.hex()}"
    scores, left = grade(ran("ok", f"{nonce} start 0", verdict, tampered))
    assert len(scores) == 1 and left == 2
    assert (scores[0].reward, scores[0].error, scores[0].details["status"]) == (0.0, ErrorKind.MODEL, "tampered")


# ------------------------------------------------------------------ in the sandbox
@requires_bwrap
def test_canonical_solutions_pass_and_wrong_ones_fail(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    tasks = [humaneval_task(problems()[name]) for name in SAMPLE]
    stub = "```python\n    return None\n```"
    scores = verifier.score_many([(t, t.answer or "") for t in tasks] + [(t, stub) for t in tasks])
    for score in scores[: len(tasks)]:
        assert (score.reward, score.passed, score.error) == (1.0, True, ErrorKind.NONE), score
        assert score.details["tests_passed"] == score.details["tests_total"] > 0
    for score in scores[len(tasks):]:
        assert (score.reward, score.error) == (0.0, ErrorKind.MODEL), score


@requires_bwrap
def test_per_test_results_and_partial_credit(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    task = function_task(TESTS)
    half = "def f(x):\n    return x + 1 if x < 3 else 0\n"
    score = verifier.score(task, half)
    assert score.details["tests"] == ["pass", "pass", "fail"] and score.reward == 0.0
    partial = CodeTestsVerifier(CodeTestsConfig(timeout_s=2.0, partial_credit=True), pool_size=1)
    try:
        assert partial.score(task, half).reward == pytest.approx(2 / 3)
    finally:
        partial.close()


@requires_bwrap
def test_failures_of_the_program_are_the_models(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    task = function_task(TESTS)
    responses = {"syntax_error": "def f(x) return", "load_error": "raise ValueError('at import')",
                 "timeout": "def f(x):\n    while True: pass", "statement_failed": "def f(x):\n    raise KeyError(x)"}  # fmt: skip
    scores = verifier.score_many([(task, r) for r in responses.values()])
    for status, score in zip(responses, scores, strict=True):
        assert (score.details["status"], score.reward, score.error) == (status, 0.0, ErrorKind.MODEL), score


@requires_bwrap
def test_a_candidate_cannot_end_the_tests_iteration_early(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    task = function_task("def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n")
    assert verifier.score(task, "def f(x):\n    return x > 0").passed
    score = verifier.score(task, "def f(x):\n    raise StopIteration")
    assert (score.reward, score.details["tests"]) == (0.0, ["error"])


@requires_bwrap
def test_setup_runs_in_the_tests_namespace(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    task = function_task("def check(candidate):\n    assert candidate(BASE) == BASE * 2\n", setup="BASE = 21")
    assert verifier.score(task, "def f(x):\n    return 2 * x").passed


@requires_bwrap
def test_tests_that_cannot_run_on_any_program_are_infra(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    broken = function_task("raise RuntimeError('gold bug')\ndef check(candidate):\n    assert candidate(1)\n")
    unencodable = function_task("def check(candidate):\n    assert candidate(object())\n")
    for task in (broken, unencodable):
        score = verifier.score(task, "def f(x):\n    return x")
        assert score.error is ErrorKind.INFRA, score


@requires_bwrap
def test_a_sandbox_that_cannot_run_the_harness_gives_infra_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    import posttrain.verify.code as code

    monkeypatch.setattr(code, "_COMPILE", "import sys; sys.exit(1)")  # as if python3 were broken there
    broken = CodeTestsVerifier(CodeTestsConfig(timeout_s=2.0), pool_size=1)
    task = function_task(TESTS)
    scores = broken.score_many([(task, "def f(x):\n    return x + 1")] * 2)
    assert [s.error for s in scores] == [ErrorKind.INFRA, ErrorKind.INFRA]
    broken.close()


@requires_bwrap
def test_io_style_compares_stdout_per_case(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    task = io_task([("1 2\n", "3\n"), ("5 5\n", "10")])
    program = "```python\na, b = map(int, input().split())\nprint(a + b, '  ')\n```"
    wrong = "a, b = map(int, input().split())\nprint(a * b)"
    crash = "import sys\nsys.exit(3)"
    hang = "while True: pass"
    scores = verifier.score_many([(task, program), (task, wrong), (task, crash), (task, hang)])
    assert scores[0].passed and scores[0].details["tests"] == ["pass", "pass"]
    assert scores[1].details["tests"] == ["fail", "not_run"] and scores[1].error is ErrorKind.MODEL
    assert scores[2].details["status"] == "runtime_error" and scores[2].error is ErrorKind.MODEL
    assert scores[3].details["status"] == "timeout" and scores[3].error is ErrorKind.MODEL


@requires_bwrap
def test_a_batch_runs_concurrently_in_the_pool(verifier: CodeTestsVerifier) -> None:  # noqa: F811
    pool = run_blocking(verifier._pool.get(), 120.0)
    original, running, peak, sizes = pool.run, [0], [0], []

    async def counting_run(*args: object, **kwargs: object) -> ExecResult:
        sizes.append(int(kwargs["stdin"].split(b"\n", 1)[0]))  # type: ignore[attr-defined]
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        try:
            return await original(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            running[0] -= 1

    pool.run = counting_run  # type: ignore[method-assign]
    try:
        task = function_task(TESTS)
        scores = verifier.score_many([(task, "def f(x):\n    return x + 1")] * 6)
        first_peak = peak[0]
        one_run = verifier.score_many([(task, "def f(x):\n    return x + 1")] * (MAX_RUN_ITEMS * verifier.pool_size))
    finally:
        del pool.run
    assert all(s.passed for s in scores + one_run)
    assert "marshal.loads" in verifier._harness[-1]  # runs load the harness compiled once, not its source
    size = math.ceil(6 / verifier.pool_size)  # responses per run: spread over the pool first
    assert sizes[: math.ceil(6 / size)] == [size] * (6 // size) + ([6 % size] if 6 % size else [])
    assert first_peak == math.ceil(6 / size)  # every run was in flight at once (the pool queues what it cannot run yet)
    assert sizes[math.ceil(6 / size) :] == [MAX_RUN_ITEMS] * verifier.pool_size


def test_the_grader_scores_sandboxed_items_in_one_batch_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    class Recording:
        def score(self, task: Task, response: str) -> Score:
            raise AssertionError("items must come through score_many")

        def score_many(self, items: Sequence[tuple[Task, str]]) -> list[Score]:
            calls.append(len(items))
            return [Score.correct(response=r) for _, r in items]

    import posttrain.verify.executor as executor

    real_build = executor.build_verifier
    monkeypatch.setattr(executor, "build_verifier",
                        lambda cfg: Recording() if isinstance(cfg, CodeTestsConfig) else real_build(cfg))  # fmt: skip
    configs = {"code/a": CodeTestsConfig(), "exact/b": ExactConfig()}
    code, exact = Task(id="a#0", domain_id="code/a", prompt="q"), Task(id="b#0", domain_id="exact/b", prompt="q", gold="x")
    with Grader(configs.__getitem__, ExecutorConfig(num_workers=1)) as grader:
        scores = grader.grade([(code, "1"), (exact, "x"), (code, "2"), (code, "3")])
        assert grader._pool is not None and grader._pool.num_restarts == 0
    assert calls == [3]  # one batch, not three calls, and never through the worker process
    assert [s.details.get("response") for s in scores] == ["1", None, "2", "3"]
    assert scores[1].passed  # the exact item still went to the worker pool
