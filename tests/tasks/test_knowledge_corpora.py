"""The procedural knowledge corpora: evidence sits only where it was put, filler states no fact, sibling
questions share the document prefix, sizes match the levels, and the ways a response could score
without citing the right sections all fall short of 1."""

from __future__ import annotations

import random
import re
from functools import cache

import pytest

from posttrain.tasks.families.knowledge import KnowledgeConfig, KnowledgeFamily
from posttrain.tasks.families.knowledge.annual_report_prose import VOCABULARY as REPORT_PROSE
from posttrain.tasks.families.knowledge.corpus import LEVEL_TOKENS
from posttrain.tasks.families.knowledge.policy_manual_prose import VOCABULARY as POLICY_PROSE
from posttrain.tasks.families.knowledge.procedural import CORPORA
from posttrain.tasks.families.knowledge.prose import FillerWriter, Vocabulary
from posttrain.tasks.families.knowledge.tech_spec_prose import VOCABULARY as SPEC_PROSE
from posttrain.types import DomainSpec, Task
from posttrain.verify import build_verifier
from posttrain.verify.citation_gold import CitationGold
from posttrain.verify.configs import CitationsConfig

PROCEDURAL = ["annual_report", "policy_manual", "tech_spec"]
VERIFIER = build_verifier(CitationsConfig())


@cache
def family() -> KnowledgeFamily:
    return KnowledgeFamily(KnowledgeConfig(corpora=PROCEDURAL))  # type: ignore[arg-type]


def domain(corpus: str, qtype: str, level: str) -> DomainSpec:
    return next(d for d in family().domains() if d.id == f"knowledge/{corpus}/{qtype}@{level}")


def tasks_of(corpus: str, level: str, indices: range, seed: int = 0) -> list[Task]:
    return [family().task(domain(corpus, q, level), i, seed) for q in CORPORA[corpus].questions for i in indices]


def test_at_least_thirty_domains_with_the_taxonomy_ids() -> None:
    ids = [d.id for d in family().domains()]
    assert len(ids) >= 30 and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"knowledge/\w+/\w+@(easy|medium|hard)", i) for i in ids)
    assert all(d.verifier == "citations" and d.family_kind == "knowledge" for d in family().domains())


@pytest.mark.parametrize("corpus", PROCEDURAL)
@pytest.mark.parametrize("level", ["easy", "medium"])
def test_every_fact_is_stated_in_exactly_its_home_section(corpus: str, level: str) -> None:
    # The gold evidence of a fact is every section whose text states it; filler never does, and the
    # generators state each fact once - so every fact has exactly one section, over many documents.
    for seed in range(4):
        for task in tasks_of(corpus, level, range(0, 160, 16), seed):
            gold = CitationGold.model_validate(task.gold)
            facts = [f for field in gold.fields.values() for f in field.evidence] + list(gold.evidence)
            assert all(len(f.sections) == 1 for f in facts), (task.id, facts)


@pytest.mark.parametrize("vocabulary", [REPORT_PROSE, POLICY_PROSE, SPEC_PROSE], ids=["report", "policy", "spec"])
def test_filler_prose_holds_no_digits(vocabulary: Vocabulary) -> None:
    words = [s for t in vocabulary.topics for s in (*t.titles, *t.sentences)]
    words += [w for options in vocabulary.slots.values() for w in options] + [*vocabulary.openers, *vocabulary.tails]
    assert not [w for w in words if re.search(r"\d", w)]
    writer = FillerWriter(vocabulary, random.Random(0), subject="the subject")
    assert not re.search(r"\d", " ".join(str(b) for s in writer.sections_of_size("f", 3_000) for b in s.blocks))


def test_filler_drops_a_sentence_that_holds_a_forbidden_string() -> None:
    writer = FillerWriter(REPORT_PROSE, random.Random(1), subject="Ada Park", forbidden=("Ada Park",))
    sections = writer.sections_of_size("f", 2_000)
    assert sections and not any("Ada Park" in str(block) for s in sections for block in s.blocks)


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_sibling_questions_share_the_document_prefix(corpus: str) -> None:
    spec = domain(corpus, "lookup", "easy")
    siblings = [family().task(spec, i, 0) for i in range(16)]
    other = family().task(domain(corpus, "unanswerable", "easy"), 3, 0)
    next_document = family().task(spec, 16, 0)
    document = str(siblings[0].prompt).split("\n\n---\n\n")[0]
    assert {t.metadata["document_id"] for t in siblings} == {siblings[0].metadata["document_id"]}
    assert all(str(t.prompt).startswith(document + "\n\n---\n\nQuestion: ") for t in [*siblings, other])
    assert next_document.metadata["document_id"] != siblings[0].metadata["document_id"]
    assert not str(next_document.prompt).startswith(document)


@pytest.mark.parametrize("corpus", PROCEDURAL)
@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
def test_prompt_lengths_match_the_level(corpus: str, level: str) -> None:
    for qtype in ("lookup", "comparison"):
        for index in (5, 21, 37):
            task = family().task(domain(corpus, qtype, level), index, 0)
            assert 0.9 * LEVEL_TOKENS[level] <= task.metadata["prompt_tokens"] <= 1.1 * LEVEL_TOKENS[level], task.id


def test_the_prompt_ends_with_the_question_and_the_format() -> None:
    task = family().task(domain("policy_manual", "compliance", "easy"), 0, 0)
    question, instruction = str(task.prompt).split("\n\n---\n\n")[1].split("\n\n", 1)
    assert question.startswith("Question: Case:")
    assert "`Answer: <answer>`" in instruction and "`Citations:`" in instruction and "yes or no" in instruction


def test_unanswerable_prompts_read_like_answerable_ones() -> None:
    asked = family().task(domain("annual_report", "unanswerable", "easy"), 0, 0)
    answerable = family().task(domain("annual_report", "lookup", "easy"), 0, 0)
    assert str(asked.prompt).split("Question: ")[1].split("\n\n", 1)[1] == str(answerable.prompt).split(
        "Question: ")[1].split("\n\n", 1)[1]  # fmt: skip


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_generation_is_deterministic_and_seeded(corpus: str) -> None:
    spec = domain(corpus, "exception", "medium")
    fresh = KnowledgeFamily(KnowledgeConfig(corpora=[corpus]))  # type: ignore[list-item]
    assert fresh.task(spec, 7, 3) == family().task(spec, 7, 3)
    assert fresh.task(spec, 7, 4).prompt != family().task(spec, 7, 3).prompt


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_comparison_cites_both_documents(corpus: str) -> None:
    for index in range(0, 64, 8):
        task = family().task(domain(corpus, "comparison", "easy"), index, 1)
        assert "A§" in str(task.answer) and "B§" in str(task.answer)
        assert "# Document A: " in str(task.prompt) and "# Document B: " in str(task.prompt)


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_exceptions_rest_on_the_rule_and_its_override(corpus: str) -> None:
    for index in range(0, 48, 3):
        gold = CitationGold.model_validate(family().task(domain(corpus, "exception", "easy"), index, 2).gold)
        assert len(gold.evidence) >= 2 and len({s for f in gold.evidence for s in f.sections}) >= 2


def swap_citations(answer: str, cites: str) -> str:
    return re.sub(r"Citations: .*", f"Citations: {cites}", answer)


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_right_answers_with_wrong_citations_fall_short(corpus: str) -> None:
    rng = random.Random(0)
    for task in tasks_of(corpus, "easy", range(0, 64, 16)):
        gold = CitationGold.model_validate(task.gold)
        if gold.type == "json":
            continue
        keys = re.findall(r"^#+ (A?B?§[\w.]+) ", str(task.prompt), flags=re.MULTILINE)
        relevant = {s for f in gold.evidence for s in f.sections}
        wrong = rng.sample([k for k in keys if k not in relevant], 2)
        assert VERIFIER.score(task, str(task.answer)).reward == 1.0
        for cites in (", ".join(keys), ", ".join(wrong), "none"):
            reward = VERIFIER.score(task, swap_citations(str(task.answer), cites)).reward
            assert reward < 1.0 or (gold.type == "not_stated" and cites == "none"), (task.id, cites)


@pytest.mark.parametrize("corpus", PROCEDURAL)
def test_not_stated_scores_zero_on_answerable_questions(corpus: str) -> None:
    for task in tasks_of(corpus, "easy", range(0, 32, 16)):
        if CitationGold.model_validate(task.gold).type != "not_stated":
            assert VERIFIER.score(task, "Answer: not stated\nCitations: none").reward == 0.0, task.id
