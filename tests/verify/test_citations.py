"""The `citations` verifier: reward maths worked by hand, the response format, and one test per way a
response could score without answering from the right sections."""

from __future__ import annotations

from typing import Any

import pytest

from posttrain.types import ErrorKind, Score
from posttrain.verify import build_verifier
from posttrain.verify.citation_gold import CitationGold, EvidenceFact, FieldGold
from posttrain.verify.citation_parse import cite_keys, parse_response
from posttrain.verify.configs import CitationsConfig
from tests.verify.factories import make_task

# Revenue 1,234 needs two facts: the table row in §3.1 and a restatement note stated in §7.2 (and
# repeated in §7). The document also has sections §1, §2, §5 and §6 that state neither.
EVIDENCE = (EvidenceFact(fact="table row", sections=("§3.1",)), EvidenceFact(fact="note", sections=("§7.2", "§7")))
NUMERIC = CitationGold(type="numeric", answer=1234, evidence=EVIDENCE)
ALL_SECTIONS = ("§1", "§2", "§3", "§3.1", "§3.2", "§5", "§6", "§7", "§7.1", "§7.2")


def score(gold: CitationGold, response: str, **config: Any) -> Score:
    return build_verifier(CitationsConfig(**config)).score(make_task(gold.model_dump(mode="json")), response)


def test_gold_response_scores_one() -> None:
    result = score(NUMERIC, "Answer: 1,234\nCitations: §3.1, §7.2")
    assert (result.reward, result.passed, result.error) == (1.0, True, ErrorKind.NONE)
    assert result.details["citation_f1"] == 1.0 and result.details["answer_type"] == "numeric"


def test_worked_example_of_the_docs() -> None:
    # Cites §3.1 (supports the table fact) and §5 (supports nothing):
    # P = 1/2, R = 1 covered fact / 2 facts = 1/2, F1 = 2 * 1/2 * 1/2 / (1/2 + 1/2) = 1/2.
    # reward = accuracy 1 x F1 1/2 = 0.5; support fails (§5 states no needed fact).
    result = score(NUMERIC, "Answer: 1234\nCitations: §3.1, §5")
    assert result.reward == pytest.approx(0.5)
    assert result.details["citation_precision"] == pytest.approx(0.5)
    assert result.details["citation_recall"] == pytest.approx(0.5)
    assert result.details["citation_support"] == 0.0
    assert not result.passed and result.error is ErrorKind.MODEL


def test_citation_weight_mixes_accuracy_and_f1() -> None:
    # Same response, w = 0.5: reward = 1 x ((1 - 0.5) + 0.5 x 0.5) = 0.75.
    assert score(NUMERIC, "Answer: 1234\nCitations: §3.1, §5", citation_weight=0.5).reward == pytest.approx(0.75)
    # w = 0: citations are ignored, the right answer alone scores 1.
    assert score(NUMERIC, "Answer: 1234\nCitations: none", citation_weight=0.0).reward == 1.0


def test_citing_every_section_collapses_precision() -> None:
    # 3 of 10 cited sections state a needed fact: P = 0.3, R = 1, F1 = 0.6 / 1.3 = 0.4615...
    result = score(NUMERIC, f"Answer: 1234\nCitations: {', '.join(ALL_SECTIONS)}")
    assert result.details["citation_precision"] == pytest.approx(0.3)
    assert result.reward == pytest.approx(0.6 / 1.3)


def test_citing_nothing_scores_zero() -> None:
    for citations in ("Citations: none", "", "Citations:"):
        result = score(NUMERIC, f"Answer: 1234\n{citations}")
        assert result.reward == 0.0 and result.details["accuracy"] == 1.0


def test_not_stated_to_an_answerable_question_scores_zero() -> None:
    assert score(NUMERIC, "Answer: not stated\nCitations: none").reward == 0.0


def test_right_answer_with_the_wrong_section_is_below_one() -> None:
    result = score(NUMERIC, "Answer: 1234\nCitations: §3.2, §7.1")
    assert result.reward == 0.0 and result.details["citation_support"] == 0.0
    partly = score(NUMERIC, "Answer: 1234\nCitations: §3.1, §7.2, §6")
    assert 0.0 < partly.reward < 1.0
    assert score(NUMERIC, "Answer: 1234\nCitations: §3.1, §7.2, §6", unsupported_zero=True).reward == 0.0


def test_citing_a_parent_section_does_not_cover_a_child_fact() -> None:
    assert score(NUMERIC, "Answer: 1234\nCitations: §3, §7.2").details["citation_recall"] == 0.5


def test_citation_ids_that_do_not_exist_count_against_precision() -> None:
    result = score(NUMERIC, "Answer: 1234\nCitations: §3.1, §7.2, §99.9, §banana")
    assert result.details["citation_precision"] == pytest.approx(0.5)
    assert result.reward < 1.0


def test_the_last_answer_counts() -> None:
    assert score(NUMERIC, "Answer: 12\nCitations: §3.1, §7.2\nAnswer: 1234\nCitations: §3.1, §7.2").reward == 1.0
    assert score(NUMERIC, "Answer: 1234\nCitations: §3.1, §7.2\nAnswer: 12\nCitations: §3.1, §7.2").reward == 0.0


def test_citations_before_the_last_answer_cannot_be_borrowed() -> None:
    assert score(NUMERIC, "Answer: 1234\nCitations: §3.1, §7.2\n\nOn reflection:\nAnswer: 1234").reward == 0.0


def test_an_answer_that_hedges_between_two_numbers_fails() -> None:
    for hedge in ("12 or 1234", "1234 (maybe 1235)", "between 1,200 and 1,300", "1234-1240"):
        assert score(NUMERIC, f"Answer: {hedge}\nCitations: §3.1, §7.2").reward == 0.0, hedge


def test_an_answer_mentioned_inline_is_not_an_answer_line() -> None:
    assert score(NUMERIC, "I think the answer: 1234 fits. Citations: §3.1, §7.2").reward == 0.0


@pytest.mark.parametrize("answer", ["1,234", "1234", "1234.0", "$1,234", "USD 1,234 million", "1,234 USD m",
                                    "**1,234**", "`1234`", "1234."])
def test_numbers_with_units_and_separators(answer: str) -> None:
    assert score(NUMERIC, f"Answer: {answer}\nCitations: §3.1, §7.2").reward == 1.0, answer


@pytest.mark.parametrize("answer", ["1.234", "12,34", "1235", "-1234", "1,234,000", "1234% of 2023"])
def test_wrong_or_ambiguous_numbers_fail(answer: str) -> None:
    assert score(NUMERIC, f"Answer: {answer}\nCitations: §3.1, §7.2").reward == 0.0, answer


def test_percent_negative_and_tolerance() -> None:
    margin = CitationGold(type="numeric", answer="12.5", abs_tol=0.051, evidence=EVIDENCE[:1])
    for answer in ("12.5%", "12.50 %", "12.54"):
        assert score(margin, f"Answer: {answer}\nCitations: §3.1").reward == 1.0, answer
    assert score(margin, "Answer: 12.6%\nCitations: §3.1").reward == 0.0
    drop = CitationGold(type="numeric", answer=-48, evidence=EVIDENCE[:1])
    for answer in ("-48", "−48", "-48 USD million"):
        assert score(drop, f"Answer: {answer}\nCitations: §3.1").reward == 1.0, answer
    assert score(drop, "Answer: 48\nCitations: §3.1").reward == 0.0


@pytest.mark.parametrize("line", ["Citations: &sect;3.1, § 7.2", "Citations: §３.１, §７.２", "**Citations:** §3.1; §7.2.",
                                  "Citations: [§3.1] and (§7.2)", "citation: §3.1,§7.2"])
def test_accepted_citation_spellings(line: str) -> None:
    assert score(NUMERIC, f"**Answer:** 1,234\n{line}").reward == 1.0, line


@pytest.mark.parametrize("line", ["Citations: ⸹3.1, ⸹7.2", "Citations: Section 3.1, Section 7.2", "Citations: 3.1, 7.2",
                                  "Citations: S3.1, S7.2", "Citations: §§3.1"])
def test_lookalike_citations_are_not_citations(line: str) -> None:
    assert score(NUMERIC, f"Answer: 1234\n{line}").details["num_cited"] == 0, line


def test_cite_keys_are_canonical_and_case_sensitive() -> None:
    assert cite_keys("A§2.1, B §2.1, §json.dumps(), §json.JSONEncoder.") == {"A§2.1", "B§2.1", "§json.dumps",
                                                                             "§json.JSONEncoder"}
    assert cite_keys("§JSON.dumps") != cite_keys("§json.dumps")


def test_a_section_of_the_other_document_does_not_support() -> None:
    gold = CitationGold(type="numeric", answer=5, evidence=(EvidenceFact(fact="a", sections=("A§2.1",)),
                                                            EvidenceFact(fact="b", sections=("B§2.1",))))  # fmt: skip
    assert score(gold, "Answer: 5\nCitations: A§2.1, B§2.1").reward == 1.0
    assert score(gold, "Answer: 5\nCitations: §2.1").reward == 0.0


def test_unanswerable_rewards_not_stated_without_citations() -> None:
    gold = CitationGold(type="not_stated")
    assert score(gold, "Answer: not stated\nCitations: none").reward == 1.0
    assert score(gold, "answer: Not stated.").reward == 1.0
    cited = score(gold, "Answer: not stated\nCitations: §3.1")
    assert cited.reward == 0.0 and cited.details["citation_precision"] == 0.0
    assert score(gold, "Answer: 1234\nCitations: none").reward == 0.0
    assert score(gold, "Answer: not stated, but probably 1234").reward == 0.0


def test_yes_no_takes_one_word() -> None:
    gold = CitationGold(type="yes_no", answer="no", evidence=EVIDENCE[:1])
    assert score(gold, "Answer: No.\nCitations: §3.1").reward == 1.0
    for hedge in ("yes", "yes or no", "No, yes", "no/yes", "it depends"):
        assert score(gold, f"Answer: {hedge}\nCitations: §3.1").reward == 0.0, hedge


def test_normalized_and_exact_answers() -> None:
    name = CitationGold(type="normalized", answer="Cloud Services", aliases=("Cloud",), evidence=EVIDENCE[:1])
    for answer in ("cloud  services", "**Cloud Services.**", '"Cloud Services"', "CLOUD"):
        assert score(name, f"Answer: {answer}\nCitations: §3.1").reward == 1.0, answer
    assert score(name, "Answer: Cloud Services or Logistics\nCitations: §3.1").reward == 0.0
    dunder = CitationGold(type="normalized", answer="csv.csvreader.__next__", evidence=EVIDENCE[:1])
    assert score(dunder, "Answer: `csv.csvreader.__next__`\nCitations: §3.1").reward == 1.0
    part = CitationGold(type="exact", answer="MX-9151A", evidence=EVIDENCE[:1])
    assert score(part, "Answer: MX-9151A\nCitations: §3.1").reward == 1.0
    assert score(part, "Answer: mx-9151a\nCitations: §3.1").reward == 0.0


JSON_GOLD = CitationGold(type="json", fields={
    "ceo": FieldGold(type="normalized", answer="Ada Park", evidence=(EvidenceFact(fact="ceo", sections=("§6.1",)),)),
    "founded": FieldGold(type="numeric", answer=1957, evidence=(EvidenceFact(fact="year", sections=("§6.3",)),)),
})  # fmt: skip


def test_structured_extraction_is_graded_field_by_field() -> None:
    good = 'Answer: {"ceo": {"value": "Ada Park", "cite": "§6.1"}, "founded": {"value": 1957, "cite": ["§6.3"]}}'
    assert score(JSON_GOLD, good).reward == 1.0
    # One field wrong: mean of 0 and 1.
    half = 'Answer: {"ceo": {"value": "Bo Li", "cite": "§6.1"}, "founded": {"value": "1957", "cite": "§6.3"}}'
    result = score(JSON_GOLD, half)
    assert result.reward == 0.5 and result.details["fields"]["ceo"]["accuracy"] == 0.0
    # A field without its own citation earns nothing, even with the right value.
    bare = 'Answer: {"ceo": "Ada Park", "founded": {"value": 1957, "cite": "§6.3"}}'
    assert score(JSON_GOLD, bare).reward == 0.5
    # Citing every governance section for a field: P = 1/3 for that field -> F1 = 0.5.
    spray = 'Answer: {"ceo": {"value": "Ada Park", "cite": "§6.1, §6.2, §6.3"}, "founded": {"value": 1957, "cite": "§6.3"}}'
    assert score(JSON_GOLD, spray).reward == pytest.approx((0.5 + 1.0) / 2)


def test_structured_extraction_multiline_and_extra_keys() -> None:
    text = ('Answer:\n```json\n{"ceo": {"value": "ada park", "cite": "§6.1"},\n "founded": {"value": 1957, "cite": "§6.3"},'
            '\n "extra": {"value": 1, "cite": "§1"}}\n```')  # fmt: skip
    assert score(JSON_GOLD, text).reward == 1.0


@pytest.mark.parametrize("response", ["Answer: {not json", "Answer: [1, 2]", "Answer: ceo is Ada Park", "",
                                      'Answer: {"ceo": {"value": {"deep": 1}, "cite": 7}}'])
def test_structured_extraction_garbage_scores_zero(response: str) -> None:
    result = score(JSON_GOLD, response)
    assert result.reward == 0.0 and result.error is ErrorKind.MODEL


@pytest.mark.parametrize("response", ["", "  ", "zzq ~~ ###garbage### \x00 \\boxed{qqzx} Answer: nonsense-token",
                                      "\ud800\udc00\ud800 Answer: \ud800", "Answer:", "Citations: §3.1, §7.2",
                                      "Answer: " + "9" * 5000])
def test_empty_and_garbage_are_model_failures(response: str) -> None:
    result = score(NUMERIC, response)
    assert (result.reward, result.passed, result.error) == (0.0, False, ErrorKind.MODEL)


def test_giant_responses_are_read_from_their_tail() -> None:
    padding = "lorem §1 §2 §5 " * 80_000  # ~1.2 MB of reasoning that cites everything
    assert score(NUMERIC, padding + "\nAnswer: 1,234\nCitations: §3.1, §7.2").reward == 1.0
    assert score(NUMERIC, "Answer: 1,234\nCitations: §3.1, §7.2\n" + padding).reward == 0.0


def test_bad_gold_is_an_infra_failure() -> None:
    for gold in (None, {"type": "numeric", "answer": 1}, {"type": "json"}, {"type": "numeric", "answer": "abc",
                                                                            "evidence": [{"fact": "f", "sections": ["§1"]}]}):
        result = build_verifier(CitationsConfig()).score(make_task(gold), "Answer: 1\nCitations: §1")
        assert result.error is ErrorKind.INFRA, gold


def test_gold_records_reject_inconsistent_shapes() -> None:
    with pytest.raises(ValueError):
        CitationGold(type="not_stated", evidence=EVIDENCE)
    with pytest.raises(ValueError):
        CitationGold(type="numeric", answer=1)
    with pytest.raises(ValueError):
        EvidenceFact(fact="x", sections=())


def test_parse_response_splits_answer_and_citations() -> None:
    parsed = parse_response("thinking...\n> **Final answer:** 42 **Citations:** §2.1, §3\n")
    assert parsed.answer_block is not None and parsed.answer_block.strip(" *") == "42"
    assert parsed.citations == {"§2.1", "§3"}
