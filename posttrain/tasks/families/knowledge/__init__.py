"""Knowledge domains: long documents with section ids, then a question; the answer AND its citations are
graded (verifier kind `citations`). Family kind `knowledge` (`KnowledgeConfig`, opt-in).

Domains `knowledge/<corpus>/<question type>@<level>`: the procedural corpora `annual_report`,
`policy_manual` and `tech_spec` (`CORPORA`) and, when Debian's python3-doc is installed, `python_docs`
(`pydoc.py`; when it is missing those domains are left out and the reason is in `family.problems`).
Levels are prompt lengths: easy about 2K, medium 8K, hard 32K SmolLM2 tokens.

Task index -> (document index, question index) = divmod(index, questions_per_document): consecutive
indices ask different questions about the same document, whose rendering is the prompt's prefix, so a
batch's prompts share their KV prefix. The document depends on (seed, corpus, level, document index)
only - question types of one corpus and level share documents too (comparison uses pairs).
Domains declare `context_size` = questions_per_document and tasks carry the document text's hash as
`context_hash`, so the pool draws a document's questions together and splits by document (no question
about an evaluation document is trained on). `Task.metadata` holds `document_id`, `question_index` and
`prompt_tokens` (estimated). Recent bundles are cached (`CACHE_SIZE`), so the questions of a document do
not re-render it.

Not here: the document model (`document.py`), grading (`posttrain.verify.citations`).
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from posttrain.config import StrictModel
from posttrain.tasks.base import task_id, task_rng
from posttrain.tasks.families.knowledge.corpus import Bundle, DocumentSource
from posttrain.tasks.families.knowledge.document import estimate_tokens
from posttrain.tasks.families.knowledge.procedural import CORPORA
from posttrain.tasks.families.knowledge.pydoc import PYTHON_DOCS, PythonDocs, find_library
from posttrain.tasks.families.knowledge.questions import EvidenceError, Question, prompt
from posttrain.types import LEVEL_DIFFICULTY, DomainSpec, Level, Task
from posttrain.verify.configs import CitationsConfig, VerifierConfig

CorpusName = Literal["annual_report", "policy_manual", "tech_spec", "python_docs"]
_ALL_CORPORA: tuple[CorpusName, ...] = get_args(CorpusName)
_ALL_LEVELS: tuple[Level, ...] = get_args(Level)
CACHE_SIZE = 32
"""Bundles kept per family (a 32K-token bundle is about 130 KB of text plus its section lines)."""


class KnowledgeConfig(StrictModel):
    kind: Literal["knowledge"] = "knowledge"
    """Long documents with section ids; answers graded with their citations (opt-in)."""
    corpora: list[CorpusName] = Field(default_factory=lambda: list(_ALL_CORPORA))
    """Which corpora become domains (`python_docs` needs Debian's python3-doc)."""
    levels: list[Level] = Field(default_factory=lambda: list(_ALL_LEVELS))
    """Which prompt lengths become domains: easy ~2K, medium ~8K, hard ~32K tokens."""
    questions_per_document: int = Field(16, ge=1, le=4096)
    """Consecutive task indices asking about one document."""
    python_docs_dir: Path | None = None
    """The python3-doc `library` HTML folder; None looks in /usr/share/doc."""


class KnowledgeFamily:
    """Generates knowledge tasks; documents are made per (corpus, level, document index) and cached."""

    def __init__(self, config: KnowledgeConfig) -> None:
        self.config = config
        self.problems: list[str] = []
        self._sources: dict[str, DocumentSource] = {name: CORPORA[name] for name in config.corpora if name in CORPORA}
        if PYTHON_DOCS in config.corpora:
            library = find_library(config.python_docs_dir)
            if library is None:
                self.problems.append("knowledge/python_docs left out: Debian's python3-doc is not installed "
                                     "(make setup, or apt-get install python3-doc)")  # fmt: skip
            else:
                self._sources[PYTHON_DOCS] = PythonDocs(library)
        self._domains = [
            DomainSpec(id=f"knowledge/{name}/{qtype}@{level}", family_kind="knowledge", source=_source_of(name),
                       verifier="citations", difficulty=LEVEL_DIFFICULTY[level],
                       context_size=config.questions_per_document,
                       description=f"{name.replace('_', ' ')}: {qtype} question, {level} (~{_TOKENS[level]} tokens)")
            for name, source in self._sources.items() for qtype in source.questions for level in config.levels
        ]  # fmt: skip
        self._cache: OrderedDict[tuple[str, str, int, int, bool], Bundle] = OrderedDict()
        self._lock = threading.Lock()

    def domains(self) -> Sequence[DomainSpec]:
        return self._domains

    def task(self, domain: DomainSpec, index: int, seed: int) -> Task:
        path = domain.path
        source, level, qtype = self._sources[path.family], path.level or "medium", path.domain
        doc_index, question_index = divmod(index, self.config.questions_per_document)
        paired = qtype == "comparison"
        found, question, doc_index = self._question(source, level, qtype, seed, doc_index, task_rng(seed, domain.id, index))
        example = f"A{source.example_cite}" if paired else source.example_cite
        text = prompt(found.text, question, len(found.documents), example)
        document_id = f"knowledge/{source.name}@{level}/{'pair' if paired else 'doc'}/{seed}/{doc_index}"
        metadata = {"document_id": document_id, "question_index": question_index,
                    "prompt_tokens": found.num_tokens + estimate_tokens(text[len(found.text) :])}  # fmt: skip
        return Task(id=task_id(domain.id, index), domain_id=domain.id, prompt=text,
                    gold=question.gold.model_dump(mode="json"), answer=question.answer,
                    difficulty=domain.difficulty, metadata=metadata,
                    context_hash=hashlib.sha256(found.text.encode()).hexdigest())  # fmt: skip

    def verifier(self, domain: DomainSpec) -> VerifierConfig:
        return CitationsConfig()

    def _question(self, source: DocumentSource, level: str, qtype: str, seed: int, doc_index: int,
                  rng: random.Random) -> tuple[Bundle, Question, int]:  # fmt: skip
        """A question of `qtype` about document `doc_index`, or, when that document offers none (a real
        corpus's slice without e.g. a `New in version` note), about the next document that does."""
        for attempt in range(_MAX_DOCUMENT_TRIES):
            tried = doc_index + attempt * _DOCUMENT_STRIDE
            found = self._bundle(source, level, seed, tried, qtype == "comparison")
            try:
                return found, source.questions[qtype](found, rng), tried
            except EvidenceError:
                if attempt == _MAX_DOCUMENT_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _bundle(self, source: DocumentSource, level: str, seed: int, doc_index: int, paired: bool) -> Bundle:
        key = (source.name, level, seed, doc_index, paired)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        made = source.make_bundle(level, seed, doc_index, paired)
        with self._lock:
            self._cache[key] = made
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return made


_TOKENS = {"easy": "2K", "medium": "8K", "hard": "32K"}
_MAX_DOCUMENT_TRIES = 32
_DOCUMENT_STRIDE = 7_919
"""A prime: the documents tried after one that offers no question of a type are far from it."""


def _source_of(name: str) -> str:
    return "python3-doc" if name == PYTHON_DOCS else "builtin"
