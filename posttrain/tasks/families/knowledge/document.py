"""The document model of the knowledge domains: a tree of sections with stable ids, rendered as text.

A `Document` is a title, an optional preamble and a tree of `Section`s; a section has an id (`3.2`, or
a source's own anchor such as `json.dumps`), a title, and blocks - paragraphs (str) and `Table`s (a
header row and rows of cells). A section is cited by its cite key: the document's letter (empty for a
single document; `A`, `B` when a prompt holds two), `§`, then its id - `§3.2`, `A§2.1`, `§json.dumps`.

`render(documents)` is deterministic: every heading shows its cite key (`## §3.2 Segment results`),
tables are plain pipe tables, nothing depends on the question - so every question on a document shares
the same prompt prefix byte for byte. `section_lines` gives each section's OWN lines (heading,
paragraphs, table rows; not its subsections'): evidence is located in those, so citing a parent section
does not cover a fact stated in its child. `numbered` turns drafting handles into `1`, `1.2`, ... ids
and `resolve_refs` writes cross-references (`[[handle]]` in a draft) as the cite keys they point to.

Not here: what the documents say (the corpora) or questions about them (`questions.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

_REF = re.compile(r"\[\[([\w.\-]+)\]\]")
_WORD = re.compile(r"[^\W\d_]+")
_DIGIT = re.compile(r"\d")
_SYMBOL = re.compile(r"[^\w\s]")
TOKENS_PER_WORD = 1.2
TOKENS_PER_DIGIT = 0.85
TOKENS_PER_SYMBOL = 0.95
"""SmolLM2 tokens per word, digit and symbol of rendered knowledge documents (fitted on all corpora and
levels; within 9% of the real count, `tests/tasks/test_knowledge_tokens.py`). Characters per token alone
vary from 3.5 (tables of figures) to 5.4 (prose), so a single ratio would be off by 20%."""


@dataclass(frozen=True)
class Table:
    """A table: a header row and rows of cells (all text), with an optional caption line above it."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""

    def lines(self) -> list[str]:
        """The caption (if any), the header, the rule and one line per row, as pipe-table text."""
        head = [self.caption] if self.caption else []
        rule = "| " + " | ".join("---" for _ in self.header) + " |"
        return [*head, _row(self.header), rule, *(_row(row) for row in self.rows)]


Block = str | Table
"""A paragraph or a table."""


@dataclass(frozen=True)
class Section:
    """A section: its id (unique in its document), title, blocks and subsections."""

    id: str
    title: str
    blocks: tuple[Block, ...] = ()
    children: tuple[Section, ...] = ()


@dataclass(frozen=True)
class Document:
    """A titled tree of sections; `prefix` is its letter when a prompt holds several documents."""

    title: str
    sections: tuple[Section, ...]
    preamble: str = ""
    prefix: str = ""

    def key(self, section: Section) -> str:
        """The cite key of one of this document's sections."""
        return f"{self.prefix}§{section.id}"


def walk(sections: Sequence[Section], depth: int = 0) -> Iterator[tuple[Section, int]]:
    """Every section in document order with its depth (0 for top level)."""
    for section in sections:
        yield section, depth
        yield from walk(section.children, depth + 1)


def heading(document: Document, section: Section, depth: int) -> str:
    """The heading line of a section: markdown level by depth, then its cite key and title."""
    return f"{'#' * (depth + 2)} {document.key(section)} {section.title}".rstrip()


def own_lines(document: Document, section: Section, depth: int) -> list[str]:
    """A section's own text as lines: heading, paragraphs, table lines (its subsections excluded)."""
    lines = [heading(document, section, depth)]
    for block in section.blocks:
        lines.extend(block.lines() if isinstance(block, Table) else [block])
    return lines


def render(documents: Sequence[Document]) -> str:
    """The documents as one text: title, preamble, then each section's heading and blocks."""
    parts: list[str] = []
    for document in documents:
        label = f"Document {document.prefix}: " if document.prefix else ""
        parts.append(f"# {label}{document.title}")
        if document.preamble:
            parts.append(document.preamble)
        for section, depth in walk(document.sections):
            parts.append(heading(document, section, depth))
            parts.extend("\n".join(b.lines()) if isinstance(b, Table) else b for b in section.blocks)
    return "\n\n".join(parts)


def section_lines(documents: Sequence[Document]) -> dict[str, tuple[str, ...]]:
    """Cite key -> that section's own lines, for every section of every document."""
    lines: dict[str, tuple[str, ...]] = {}
    for document in documents:
        for section, depth in walk(document.sections):
            key = document.key(section)
            if key in lines:
                raise ValueError(f"section id {key!r} appears twice")
            lines[key] = tuple(own_lines(document, section, depth))
    return lines


def numbered(document: Document) -> tuple[Document, dict[str, str]]:
    """The document with hierarchical ids (`1`, `1.2`, `1.2.3`) and the map drafting id -> cite key."""
    keys: dict[str, str] = {}

    def renumber(sections: Sequence[Section], parent: str) -> tuple[Section, ...]:
        out = []
        for position, section in enumerate(sections, start=1):
            new_id = f"{parent}{position}"
            keys[section.id] = f"{document.prefix}§{new_id}"
            out.append(replace(section, id=new_id, children=renumber(section.children, f"{new_id}.")))
        return tuple(out)

    return replace(document, sections=renumber(document.sections, "")), keys


def resolve_refs(document: Document, keys: Mapping[str, str]) -> Document:
    """The document with every `[[handle]]` in its paragraphs replaced by that section's cite key."""

    def resolve(sections: Sequence[Section]) -> tuple[Section, ...]:
        return tuple(
            replace(s, blocks=tuple(_REF.sub(lambda m: keys[m.group(1)], b) if isinstance(b, str) else b
                                    for b in s.blocks), children=resolve(s.children))
            for s in sections
        )  # fmt: skip

    return replace(document, sections=resolve(document.sections))


def estimate_tokens(text: str) -> int:
    """The SmolLM2 token count of `text`, estimated from its words, digits and symbols."""
    words = sum(1 for _ in _WORD.finditer(text))
    digits = sum(1 for _ in _DIGIT.finditer(text))
    symbols = sum(1 for _ in _SYMBOL.finditer(text))
    return round(words * TOKENS_PER_WORD + digits * TOKENS_PER_DIGIT + symbols * TOKENS_PER_SYMBOL)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"
