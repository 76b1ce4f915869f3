"""What a corpus is, and the bundle of documents its questions are asked about.

A `Corpus` drafts documents (section ids are drafting handles such as `rev_table`) of about a given
number of tokens, alone or as a pair for comparison questions, and owns one question maker per question type.
`Bundle` is the finished prompt material: the documents numbered (`1`, `1.2`, ...; letters `A`/`B` for
a pair), rendered once, the map handle -> cite key per document and every section's own lines for
locating evidence. Question makers read the corpus's data (`Bundle.data`) and `Bundle.keys`.

Guarantees: a bundle is a pure function of its drafts; rendering happens once per bundle. Not here:
which bundle a task uses or caching (`family.py`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from posttrain.tasks.base import task_rng
from posttrain.tasks.families.knowledge.document import (
    Document,
    estimate_tokens,
    numbered,
    render,
    resolve_refs,
    section_lines,
    walk,
)
from posttrain.tasks.families.knowledge.questions import Lines, Question

LEVEL_TOKENS: dict[str, int] = {"easy": 2_000, "medium": 8_000, "hard": 32_000}
"""Target prompt length per level, in SmolLM2 tokens (estimated, `document.estimate_tokens`)."""

QUESTION_TOKENS = 250
"""Tokens kept free for the question and the format instruction."""

Draft = tuple[Document, Any]
"""A drafted document (ids are handles) and the data it was written from."""


@dataclass(frozen=True)
class Bundle:
    """The documents of one prompt, numbered and rendered, with what questions need to cite them."""

    documents: tuple[Document, ...]
    data: tuple[Any, ...]
    keys: tuple[Mapping[str, str], ...]
    """Per document: drafting handle -> cite key."""
    lines: Lines
    text: str
    num_tokens: int
    """The estimated token count of `text` (counted once per bundle)."""

    def key(self, handle: str, document: int = 0) -> str:
        """The cite key of a drafted section."""
        return self.keys[document][handle]


def bundle(drafts: Sequence[Draft], renumber: bool = True) -> Bundle:
    """Number (unless the ids are a source's own anchors), letter (when there are several) and render
    drafted documents."""
    documents, keys = [], []
    for position, (draft, _data) in enumerate(drafts):
        prefix = "AB"[position] if len(drafts) > 1 else ""
        document = Document(draft.title, draft.sections, draft.preamble, prefix)
        if renumber:
            document, handles = numbered(document)
            document = resolve_refs(document, handles)
        else:
            handles = {s.id: document.key(s) for s, _depth in walk(document.sections)}
        documents.append(document)
        keys.append(handles)
    data = tuple(item for _doc, item in drafts)
    text = render(documents)
    return Bundle(tuple(documents), data, tuple(keys), section_lines(documents), text, estimate_tokens(text))


QuestionMaker = Callable[[Bundle, random.Random], Question]
"""Asks one question about a bundle, drawing its choices from the RNG."""


class DocumentSource(Protocol):
    """Where a family's documents come from: a procedural `Corpus` or a parsed real corpus."""

    @property
    def name(self) -> str:
        """The family segment of its domain ids: `knowledge/<name>/<question type>@<level>`."""
        ...

    @property
    def questions(self) -> Mapping[str, QuestionMaker]:
        """Question type -> maker; `comparison` is asked about a pair, every other type about one document."""
        ...

    @property
    def example_cite(self) -> str:
        """A cite key shown in the format instruction (`§2.1`)."""
        ...

    def make_bundle(self, level: str, seed: int, doc_index: int, paired: bool) -> Bundle:
        """Document `doc_index` of `level` (two documents when `paired`); deterministic in its arguments."""
        ...


@dataclass(frozen=True)
class Corpus:
    """One procedural corpus: how to draft its documents and which questions it asks."""

    name: str
    draft: Callable[[random.Random, int], Draft]
    """Draft one document of about this many tokens."""
    draft_pair: Callable[[random.Random, int], tuple[Draft, Draft]]
    """Draft two related documents of about this many tokens each (comparison questions)."""
    questions: Mapping[str, QuestionMaker]
    description: str
    example_cite: str = "§2.1"

    def make_bundle(self, level: str, seed: int, doc_index: int, paired: bool) -> Bundle:
        rng = task_rng(seed, f"knowledge/{self.name}@{level}/{'pair' if paired else 'single'}", doc_index)
        if paired:
            return bundle(self.draft_pair(rng, target_tokens(level, 2)))
        return bundle([self.draft(rng, target_tokens(level, 1))])


def target_tokens(level: str, num_documents: int) -> int:
    """Tokens each document of a prompt gets at `level`."""
    return (LEVEL_TOKENS[level] - QUESTION_TOKENS) // num_documents
