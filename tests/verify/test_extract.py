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
    ],
)
def test_extract_modes(response: str, mode: str, expected: str | None) -> None:
    assert extract_answer(response, mode) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mode", ["none", "auto", "boxed", "answer_tag", "hashes", "last_number", "final_line"]
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
        "<answer>" * 1_000_000,
        "1," * 5_000_000,
        "{" * 10_000_000,
    ],
    ids=["open-boxes", "answer-spaces", "open-tags", "comma-digits", "braces"],
)
def test_adversarial_megabyte_responses_terminate(response: str) -> None:
    for mode in ("auto", "answer_block", "last_number"):
        found = extract_answer(response, mode)  # type: ignore[arg-type]
        assert found is None or len(found) <= TAIL_CHARS
