"""Built-in procedural families: hand-checked answers and level scaling."""

from __future__ import annotations

from posttrain.tasks.families.arithmetic import ArithmeticConfig, ArithmeticFamily, _evaluate
from posttrain.tasks.families.lists import ListsConfig, ListsFamily, _answer
from posttrain.tasks.families.strings import StringsConfig, StringsFamily, _make


def test_evaluate_respects_precedence() -> None:
    # 2 + 3 * 4 - 5 = 2 + 12 - 5 = 9
    assert _evaluate("2 + 3 * 4 - 5") == 9


def test_arithmetic_answers_match_their_prompts() -> None:
    family = ArithmeticFamily(ArithmeticConfig())
    for spec in family.domains():
        for index in range(20):
            task = family.task(spec, index, seed=1)
            expr = task.prompt_text().removeprefix("What is ").removesuffix("?")
            assert int(task.gold) == _evaluate(expr)


def test_hard_operands_are_wider_than_easy() -> None:
    family = ArithmeticFamily(ArithmeticConfig(ops=["add"]))
    easy, _, hard = family.domains()
    widest = lambda spec: max(len(family.task(spec, i, 0).gold) for i in range(50))  # noqa: E731
    assert widest(hard) > widest(easy)


def test_string_ops_by_hand() -> None:
    import random

    rng = random.Random(0)
    assert _make("reverse", "abc", rng, 1) == ("Reverse the string: abc", "cba")
    assert _make("sort_chars", "cab", rng, 1)[1] == "abc"
    prompt, answer = _make("caesar", "abz", rng, 1)  # shift 1: a->b, b->c, z->a
    assert (prompt, answer) == ("Shift each letter of abz forward by 1:", "bca")


def test_list_ops_by_hand() -> None:
    assert _answer("max", [3, 9, 2]) == "9"
    assert _answer("sum", [3, 9, 2]) == "14"
    assert _answer("sort", [3, 9, 2]) == "2 3 9"
    assert _answer("dedupe", [3, 1, 3, 2, 1]) == "3 1 2"


def test_every_builtin_level_is_distinct_domain() -> None:
    ids = [
        s.id
        for fam in (ArithmeticFamily(ArithmeticConfig()), StringsFamily(StringsConfig()), ListsFamily(ListsConfig()))
        for s in fam.domains()
    ]
    assert len(ids) == len(set(ids)) == 36
