"""Answer extraction: each mode on typical and adversarial responses."""

from __future__ import annotations

import pytest

from posttrain.verify.extract import TAIL_CHARS, clean_text, extract_answer


@pytest.mark.parametrize(
    ("response", "mode", "expected"),
    [
        ("so \\boxed{42}", "boxed", "42"),
        ("\\boxed{\\frac{1}{2}} then \\boxed{\\frac{3}{\\sqrt{4}}}", "boxed", "\\frac{3}{\\sqrt{4}}"),
        ("\\boxed{a} and \\boxed{b", "boxed", "a"),  # the unbalanced last one is skipped
        ("\\boxed 7", "boxed", "7"),
        ("\\fbox{x+1}", "boxed", "x+1"),
        ("no box here", "boxed", None),
        ("thinking\nAnswer: 17\nthanks", "answer_tag", "17"),
        ("**Answer:** 3/4", "answer_tag", "3/4"),
        ("final answer: first\nFinal Answer: second", "answer_tag", "second"),
        ("<answer>\n1 2\n3 4\n</answer>", "answer_tag", "1 2\n3 4"),
        ("<ANSWER>x</ANSWER> <answer>y</answer>", "answer_tag", "y"),
        ("The answer is 18.", "answer_tag", "18"),
        ("The answer is 18.", "answer_line", "18"),
        ("The final answer to the given arithmetic problem is -7.", "answer_line", "-7"),
        ('The answer to this question is: "Lug"', "answer_line", "Lug"),
        ("**Answer:** 3/4", "answer_line", "3/4"),
        ("The answer is 1.\nThe answer is 2.", "answer_line", "2"),  # only the last statement
        ("The answer is 3. Because 1 + 2 = 3", "answer_line", "3. Because 1 + 2 = 3"),  # the line, whole
        ("The answer is 3, 4 or 5.", "answer_line", "3, 4 or 5"),  # candidates stay one string
        ('The letter "y" appears 5 times.', "answer_line", None),
        ("He answered: yes. This is it.", "answer_line", None),
        ("The answer.", "answer_line", None),
        ("work\n#### 1,234", "hashes", "1,234"),
        ("####", "hashes", None),
        ("1 then -2,500.75 then", "last_number", "-2,500.75"),
        ("ratio 3/4.", "last_number", "3/4"),
        ("value .5", "last_number", ".5"),
        ("no digits", "last_number", None),
        ("a\n b \n\n", "final_line", "b"),
        ("  padded  ", "none", "padded"),
        ("x \\boxed{1}\nAnswer: 2", "auto", "1"),
        ("x\nAnswer: 2\n#### 3", "auto", "2"),
        ("x\n#### 3", "auto", "3"),
        ("x\nlast line", "auto", "last line"),
        ("grid:\n1 2\n3 4", "answer_block", "grid:\n1 2\n3 4"),
        ("<answer>1 2\n3 4</answer>", "answer_block", "1 2\n3 4"),
        ("The answer is 4. <answer>5</answer>", "answer_block", "5"),
        ("The answer is \\boxed{6}", "answer_block", "6"),
        ("I think so.\nThe answer is 18.", "answer_block", "18"),
    ],
)
def test_extract_modes(response: str, mode: str, expected: str | None) -> None:
    assert extract_answer(response, mode) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mode",
    ["none", "auto", "boxed", "answer_tag", "answer_line", "hashes", "last_number", "final_line", "answer_block"],
)
def test_empty_response_extracts_nothing(mode: str) -> None:
    assert extract_answer("", mode) is None  # type: ignore[arg-type]


def test_only_the_tail_is_examined() -> None:
    response = "\\boxed{early}" + "x" * (2 * TAIL_CHARS)
    assert extract_answer(response, "boxed") is None


def test_lone_surrogates_are_replaced() -> None:
    cleaned = clean_text("ok \ud800 \udfff done")
    assert cleaned.encode("utf-8") and "\ud800" not in cleaned


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" * 2_000_000,
        "answer" + " " * 5_000_000,
        "answer " * 2_000_000,
        "<answer>" * 1_000_000,
        "1," * 5_000_000,
        "{" * 10_000_000,
    ],
    ids=["open-boxes", "answer-spaces", "answer-words", "open-tags", "comma-digits", "braces"],
)
def test_adversarial_megabyte_responses_terminate(response: str) -> None:
    for mode in ("auto", "answer_block", "last_number"):
        found = extract_answer(response, mode)  # type: ignore[arg-type]
        assert found is None or len(found) <= TAIL_CHARS
