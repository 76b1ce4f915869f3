"""The python3-doc corpus: the Sphinx page parser, the family's domains from a library folder (a small
fixture, and the real Debian package when it is installed), and its absence reported as a problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain.tasks.families.knowledge import KnowledgeConfig, KnowledgeFamily
from posttrain.tasks.families.knowledge.document import Document, Table, render, walk
from posttrain.tasks.families.knowledge.pydoc import find_library
from posttrain.tasks.families.knowledge.pydoc_parse import parse_page
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, load_domains
from posttrain.tasks.validate import validate_domain
from posttrain.verify import build_verifier
from posttrain.verify.citation_gold import CitationGold
from posttrain.verify.configs import CitationsConfig

FIXTURE = Path(__file__).parent / "data" / "pydoc"
REAL = find_library()
QTYPES = {"module", "default", "version_added", "returns", "unanswerable"}


def test_parser_reads_sections_definitions_and_tables() -> None:
    page = parse_page("demo", (FIXTURE / "demo.html").read_text(encoding="utf-8"))
    ids = [s.id for s, _ in walk(page.sections)]
    assert ids == ["module-demo", "demo#usage", "demo.fetch", "demo.Cache", "demo.Cache.get", "demo.FetchError"]
    assert page.title == "demo — A demonstration module"
    fetch = page.definitions["demo.fetch"]
    assert fetch.kind == "function" and fetch.added == "3.9"
    assert fetch.params == (("url", None), ("*", None), ("timeout", "10"), ("mode", "'rb'"))
    assert fetch.first_sentence == "Return the body of url as bytes."
    assert page.definitions["demo.Cache.get"].added is None  # a `Changed in` note is not an addition
    cache = next(s for s, _ in walk(page.sections) if s.id == "demo.Cache")
    table = next(b for b in cache.blocks if isinstance(b, Table))
    assert table.header == ("Setting", "Meaning") and table.rows[0] == ("size", "most entries / kept")
    text = render([Document(page.title, page.sections)])
    assert "#### §demo.fetch demo.fetch(url, *, timeout=10, mode='rb')" in text
    assert "Sidebar text" not in text and "Footer text" not in text and "¶" not in text
    assert "import demo\ndemo.fetch(" in text


def test_parser_survives_broken_markup() -> None:
    page = parse_page("x", '<div class="body"><section id="a"><h1>A</h1><p>one<dl class="py function"><dt id="x.f">f(')
    assert [s.id for s, _ in walk(page.sections)] == ["x#a", "x.f"]
    assert parse_page("y", "</div></p>garbage<<<").sections == ()


def fixture_family() -> KnowledgeFamily:
    return KnowledgeFamily(KnowledgeConfig(corpora=["python_docs"], python_docs_dir=FIXTURE))


def test_fixture_library_gives_every_question_type() -> None:
    family = fixture_family()
    assert family.problems == []
    assert {d.path.domain for d in family.domains()} == QTYPES
    verifier = build_verifier(CitationsConfig())
    for spec in family.domains():
        for index in range(4):
            task = family.task(spec, index, 0)
            assert verifier.score(task, str(task.answer)).reward == 1.0, task.id
            gold = CitationGold.model_validate(task.gold)
            assert all(len(f.sections) == 1 for f in gold.evidence)


def test_pinned_evidence_is_the_objects_own_section() -> None:
    family = fixture_family()
    spec = next(d for d in family.domains() if d.id == "knowledge/python_docs/version_added@easy")
    task = family.task(spec, 0, 0)
    gold = CitationGold.model_validate(task.gold)
    # Both demo.fetch and demo.FetchError say "New in version ..."; only the asked object's section counts.
    asked = str(task.prompt).split("Question: ")[1].split("`")[1]
    assert gold.evidence[0].sections == (f"§{asked}",)


def test_fixture_domains_validate() -> None:
    pool = TaskPool(DomainRegistry([DomainEntry(family=KnowledgeConfig(corpora=["python_docs"], python_docs_dir=FIXTURE))]))
    for domain_id in pool.registry.ids():
        check = validate_domain(pool, domain_id, num_tasks=2)
        assert check.ok, check.failures


def test_missing_python3_doc_leaves_the_domains_out_with_a_reason(tmp_path: Path) -> None:
    family = KnowledgeFamily(KnowledgeConfig(corpora=["python_docs", "tech_spec"], python_docs_dir=tmp_path))
    assert not [d for d in family.domains() if "python_docs" in d.id]
    assert [d for d in family.domains() if "tech_spec" in d.id]
    assert len(family.problems) == 1 and "python3-doc" in family.problems[0]
    registry = DomainRegistry([DomainEntry(family=KnowledgeConfig(corpora=["python_docs"], python_docs_dir=tmp_path))])
    assert len(registry) == 0 and registry.problems == family.problems


@pytest.mark.skipif(REAL is None, reason="Debian's python3-doc is not installed")
def test_real_library_page_parses_with_its_anchors() -> None:
    assert REAL is not None
    page = parse_page("json", (REAL / "json.html").read_text(encoding="utf-8"))
    dumps = page.definitions["json.dumps"]
    assert ("indent", "None") in dumps.params and ("sort_keys", "False") in dumps.params
    assert {"module-json", "json#basic-usage", "json.dumps", "json.JSONDecoder.decode"} <= {s.id for s, _ in walk(page.sections)}


@pytest.mark.skipif(REAL is None, reason="Debian's python3-doc is not installed")
def test_real_library_documents_give_gold_one_at_every_level() -> None:
    family = KnowledgeFamily(KnowledgeConfig(corpora=["python_docs"]))
    verifier = build_verifier(CitationsConfig())
    assert {d.path.domain for d in family.domains()} == QTYPES and len(family.domains()) == 15
    for spec in family.domains():
        task = family.task(spec, 3, 0)
        assert verifier.score(task, str(task.answer)).reward == 1.0, task.id
        assert verifier.score(task, "Answer: not stated\nCitations: none").reward == (1.0 if spec.path.domain == "unanswerable" else 0.0)


def test_a_relative_library_folder_resolves_against_the_domains_file(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    for page in FIXTURE.iterdir():
        (tmp_path / "lib" / page.name).write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "domains.yaml").write_text("domains:\n  - family: {kind: knowledge, corpora: [python_docs], python_docs_dir: lib}\n")
    registry = DomainRegistry.from_config(load_domains(tmp_path / "domains.yaml"))
    assert len(registry) == 15 and registry.problems == []


@pytest.mark.slow
@pytest.mark.skipif(REAL is None, reason="Debian's python3-doc is not installed")
def test_gold_scores_one_over_many_real_documents() -> None:
    family = KnowledgeFamily(KnowledgeConfig(corpora=["python_docs"]))
    verifier = build_verifier(CitationsConfig())
    failures = [task.id for spec in family.domains() for task in (family.task(spec, 16 * d, 5) for d in range(40))
                if verifier.score(task, str(task.answer)).reward != 1.0]  # fmt: skip
    assert failures == []
