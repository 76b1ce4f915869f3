"""The knowledge document model: rendering, own section lines, numbering, cross-references, bundles."""

from __future__ import annotations

import pytest

from posttrain.tasks.families.knowledge.corpus import bundle
from posttrain.tasks.families.knowledge.document import (
    Document,
    Section,
    Table,
    estimate_tokens,
    numbered,
    render,
    resolve_refs,
    section_lines,
)


def sample() -> Document:
    table = Table(("Segment", "FY2023"), (("Cloud", "1,234"), ("Retail", "567")), caption="Table: Revenue")
    child = Section("rev", "Revenue by segment", ("Revenue by segment.", table))
    note = Section("note", "Restatement", ("Cloud revenue is restated, see [[rev]].",))
    return Document("Report", (Section("results", "Segment results", ("Intro.",), (child,)), note), "In USD million.")


def test_render_shows_ids_at_headings_and_pipe_tables() -> None:
    text = render([sample()])
    assert text.startswith("# Report\n\nIn USD million.\n\n## §results Segment results")
    assert "### §rev Revenue by segment" in text
    assert "Table: Revenue\n| Segment | FY2023 |\n| --- | --- |\n| Cloud | 1,234 |" in text
    assert render([sample()]) == text


def test_documents_of_a_pair_are_lettered() -> None:
    made = bundle([(sample(), None), (sample(), None)])
    assert "# Document A: Report" in made.text and "# Document B: Report" in made.text
    assert "## A§1 Segment results" in made.text and "### B§1.1 Revenue by segment" in made.text
    assert made.key("rev", 1) == "B§1.1"


def test_section_lines_are_a_sections_own_text_only() -> None:
    lines = section_lines([sample()])
    assert lines["§results"] == ("## §results Segment results", "Intro.")
    assert "| Cloud | 1,234 |" in lines["§rev"]
    assert not any("Cloud" in line for line in lines["§results"])


def test_duplicate_ids_are_refused() -> None:
    twice = Document("x", (Section("a", "one"), Section("a", "two")))
    with pytest.raises(ValueError, match="twice"):
        section_lines([twice])


def test_numbering_and_cross_references() -> None:
    document, keys = numbered(sample())
    assert keys == {"results": "§1", "rev": "§1.1", "note": "§2"}
    resolved = resolve_refs(document, keys)
    assert "Cloud revenue is restated, see §1.1." in render([resolved])
    assert bundle([(sample(), None)]).text == render([resolved])


def test_a_bundle_without_renumbering_keeps_a_sources_anchors() -> None:
    made = bundle([(Document("Docs", (Section("json.dumps", "json.dumps(obj)"),)), None)], renumber=False)
    assert made.key("json.dumps") == "§json.dumps" and "## §json.dumps json.dumps(obj)" in made.text


def test_estimate_tokens_counts_words_digits_and_symbols() -> None:
    assert estimate_tokens("") == 0
    # 2 words x 1.2 + 4 digits x 0.85 + 2 symbols x 0.95 = 7.7
    assert estimate_tokens("Revenue: 1,234 USD") == 8
    assert estimate_tokens("word " * 100) > estimate_tokens("word " * 10)
