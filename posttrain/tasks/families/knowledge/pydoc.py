"""Corpus `python_docs`: the Python library reference from Debian's python3-doc, with its own anchors
(`json.dumps`, `module-json`, `json#basic-usage`) as section ids.

A document at a level is a slice of the reference of about the level's length: a page chosen from the
document index (for a page longer than the budget, its top-level chapters from a chosen one on),
continued with the next pages until the budget is spent; a section that does not fit is cut after its
own text with as many subsections as fit. Questions are asked from structure, the object's section as
evidence (pinned: another section that repeats e.g. `New in version 3.5.` about something else is not):
- module: which module provides a function or class (its heading `§json.dumps json.dumps(...)`);
- default: a parameter's default value (from the signature in the heading);
- version_added: the version of an object's lone `New in version X.Y.` note;
- returns: which object is documented by a quoted `Return ...` first sentence (unique in the slice);
- unanswerable: the default of a parameter the object does not have.

Pages are parsed on first use and kept for the life of the process (`PythonDocs.page`); a bundle is a
pure function of (level, seed, document index). When python3-doc is missing, `find_library` is None and
the family leaves these domains out. Not here: HTML parsing (`pydoc_parse.py`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from posttrain.tasks.base import task_rng
from posttrain.tasks.families.knowledge.corpus import Bundle, QuestionMaker, bundle, target_tokens
from posttrain.tasks.families.knowledge.document import Document, Section, Table, estimate_tokens, walk
from posttrain.tasks.families.knowledge.pydoc_parse import Definition, Page, parse_page
from posttrain.tasks.families.knowledge.questions import EvidenceError, Fact, Question, Scalar, ask

PYTHON_DOCS = "python_docs"
DEFAULT_LIBRARY = Path("/usr/share/doc/python3-doc/html/library")
MARKER = "index.html"
"""A file every python3-doc library folder has (the Makefile checks for it too)."""
_MAX_PAGES = 24
"""Pages visited for one document (the hard level needs a few; a page that gives nothing costs a parse)."""
_MIN_TOKENS = 250
"""A budget left below this does not start another page."""
_MIN_SECTION_TOKENS = 50
"""A budget left below this does not start another section."""
_FAKE_PARAMS = ("timeout", "encoding", "strict", "verbose", "callback", "buffer_size", "retries", "locale",
                "max_depth", "chunk_size", "ignore_case", "on_error")  # fmt: skip


_PAGES: dict[tuple[Path, str], Page] = {}
"""Parsed pages by (library folder, page), for the life of the process."""
_LOCK = threading.Lock()


def find_library(path: Path | None = None) -> Path | None:
    """The python3-doc library reference folder (`path`, else the Debian locations), or None."""
    candidates = [path] if path is not None else [DEFAULT_LIBRARY, *sorted(Path("/usr/share/doc").glob("python3*-doc/html/library"))]
    return next((c for c in candidates if (c / MARKER).is_file()), None)


@dataclass(frozen=True)
class DocsSlice:
    """What the questions about one document may use: the objects whose own text is in it whole."""

    definitions: dict[str, Definition]


class PythonDocs:
    """The python3-doc library reference as a document source."""

    name = PYTHON_DOCS
    example_cite = "§json.dumps"

    def __init__(self, library: Path) -> None:
        self.library = library
        self.pages = sorted(p.stem for p in library.glob("*.html") if p.name != MARKER)
        self.questions: dict[str, QuestionMaker] = {
            "module": partial(_one, _module), "default": partial(_one, _default),
            "version_added": partial(_one, _version_added), "returns": partial(_one, _returns),
            "unanswerable": partial(_one, _unanswerable),
        }  # fmt: skip

    def page(self, name: str) -> Page:
        """A parsed page (parsed once per process, whichever family asks)."""
        key = (self.library, name)
        with _LOCK:
            found = _PAGES.get(key)
        if found is None:
            found = parse_page(name, (self.library / f"{name}.html").read_text(encoding="utf-8", errors="replace"))
            with _LOCK:
                found = _PAGES.setdefault(key, found)
        return found

    def make_bundle(self, level: str, seed: int, doc_index: int, paired: bool) -> Bundle:
        rng = task_rng(seed, f"knowledge/{PYTHON_DOCS}@{level}", doc_index)
        budget = target_tokens(level, 1)
        first = rng.randrange(len(self.pages))
        taken: list[Section] = []
        titles: list[str] = []
        definitions: dict[str, Definition] = {}
        for step in range(min(len(self.pages), _MAX_PAGES)):
            if budget < _MIN_TOKENS:
                break
            page = self.page(self.pages[(first + step) % len(self.pages)])
            sections = _from_chapter(page.sections, rng) if step == 0 else page.sections
            complete: set[str] = set()
            got, used = _take(_without_ids(sections, {s.id for s, _ in walk(taken)}), budget, complete)
            if got:
                taken.extend(got)
                titles.append(page.title)
                budget -= used
                definitions |= {i: page.definitions[i] for i in complete if i in page.definitions}
        document = Document(f"Python library reference: {'; '.join(titles)}", tuple(taken))
        return bundle([(document, DocsSlice(definitions))], renumber=False)


def _from_chapter(sections: tuple[Section, ...], rng: random.Random) -> tuple[Section, ...]:
    """A long page from one of its root's chapters on (the root's own text only when starting at 0)."""
    if len(sections) != 1 or len(sections[0].children) < 2:
        return sections
    root = sections[0]
    start = rng.randrange(len(root.children))
    if start == 0:
        return sections
    return (replace(root, blocks=(), children=root.children[start:]),)


def _without_ids(sections: Sequence[Section], seen: set[str]) -> tuple[Section, ...]:
    """`sections` without any subtree whose id is already in the document (ids stay unique)."""
    return tuple(replace(s, children=_without_ids(s.children, seen)) for s in sections if s.id not in seen)


def _own_tokens(section: Section) -> int:
    return estimate_tokens(f"## §{section.id} {section.title}") + _blocks_tokens(section.blocks)


def _take(sections: Sequence[Section], budget: int, whole: set[str]) -> tuple[list[Section], int]:
    """As many sections as fit in `budget` tokens, in order; a section too long for what is left
    keeps the blocks that fit, then its subsections get the rest. Ids whose own text is complete are
    added to `whole` (questions are only asked about those)."""
    out: list[Section] = []
    used = 0
    for section in sections:
        if budget - used < _MIN_SECTION_TOKENS:
            break
        own = _own_tokens(section)
        fits = used + own <= budget
        if fits:
            whole.add(section.id)
            blocks = section.blocks
        else:
            blocks = _fit_blocks(section.blocks, budget - used - own + _blocks_tokens(section.blocks))
        used += own - _blocks_tokens(section.blocks) + _blocks_tokens(blocks)
        children, child_used = _take(section.children, budget - used, whole)
        if fits or blocks or children:
            out.append(replace(section, blocks=blocks, children=tuple(children)))
        used += child_used
    return out, used


def _block_tokens(block: str | Table) -> int:
    return estimate_tokens(block if isinstance(block, str) else "\n".join(block.lines()))


def _blocks_tokens(blocks: Sequence[str | Table]) -> int:
    return sum(_block_tokens(b) for b in blocks)


def _fit_blocks(blocks: Sequence[str | Table], budget: int) -> tuple[str | Table, ...]:
    kept: list[str | Table] = []
    for block in blocks:
        size = _block_tokens(block)
        if size > budget:
            continue  # an excerpt: a block too long for what is left is left out, shorter ones may follow
        kept.append(block)
        budget -= size
    return tuple(kept)


DefinitionQuestion = Callable[[Bundle, Sequence[Definition], random.Random], Question | None]
"""Asks one question about a slice's objects (None when none of them fits)."""


def _one(maker: DefinitionQuestion, b: Bundle, rng: random.Random) -> Question:
    data: DocsSlice = b.data[0]
    definitions = sorted(data.definitions.values(), key=lambda d: d.id)
    question = maker(b, definitions, rng)
    if question is None:
        raise EvidenceError("no question of this type can be asked of this slice")
    return question


def _pinned(b: Bundle, d: Definition, needle: str, what: str) -> Fact:
    return Fact(f"{d.id}: {what}", (needle,), (b.key(d.id),), pinned=True)


def _module(b: Bundle, defs: Sequence[Definition], rng: random.Random) -> Question | None:
    ids = {d.id for d in defs}
    short_counts: dict[str, int] = {}
    for d in defs:
        short_counts[d.id.rpartition(".")[2]] = short_counts.get(d.id.rpartition(".")[2], 0) + 1
    options = [d for d in defs if d.kind in ("function", "class", "exception") and "." in d.id
               and d.id.rpartition(".")[0] not in ids and short_counts[d.id.rpartition(".")[2]] == 1]  # fmt: skip
    if not options:
        return None
    d = rng.choice(options)
    module, _, short = d.id.rpartition(".")
    text = f"Which module provides the {d.kind} `{short}`? Give the module's full dotted name."
    return ask(text, Scalar("normalized", module, (_pinned(b, d, f"§{d.id} ", f"provided by {module}"),)), b.lines)


def _default(b: Bundle, defs: Sequence[Definition], rng: random.Random) -> Question | None:
    options = [(d, name, default) for d in defs for name, default in d.params
               if default is not None and default.strip("'\" ") and len(default) <= 40 and not name.startswith("*") and name]  # fmt: skip
    if not options:
        return None
    d, name, default = rng.choice(options)
    text = f"What is the default value of the parameter `{name}` of `{d.id}`?"
    fact = _pinned(b, d, f"{name}={default}", f"{name} defaults to {default}")
    return ask(text, Scalar("normalized", default, (fact,), aliases=(default.strip("'\""),)), b.lines)


def _version_added(b: Bundle, defs: Sequence[Definition], rng: random.Random) -> Question | None:
    options = [d for d in defs if d.added is not None]
    if not options:
        return None
    d = rng.choice(options)
    version = str(d.added)
    text = f"In which Python version was `{d.id}` added? Give the version number."
    fact = _pinned(b, d, f"New in version {version}.", f"added in {version}")
    return ask(text, Scalar("normalized", version, (fact,), aliases=(f"Python {version}", f"version {version}")), b.lines)


def _returns(b: Bundle, defs: Sequence[Definition], rng: random.Random) -> Question | None:
    counts: dict[str, int] = {}
    for d in defs:
        counts[d.first_sentence] = counts.get(d.first_sentence, 0) + 1
    options = [d for d in defs if d.first_sentence.startswith("Return ") and counts[d.first_sentence] == 1
               and 20 <= len(d.first_sentence) <= 240 and d.id.rpartition(".")[2] not in d.first_sentence]  # fmt: skip
    if not options:
        return None
    d = rng.choice(options)
    short = d.id.rpartition(".")[2]
    text = f'Which function, method or attribute is documented as follows: "{d.first_sentence}" Give its full name as in its heading.'
    fact = _pinned(b, d, d.first_sentence.rstrip("."), "documented by this sentence")
    return ask(text, Scalar("normalized", d.id, (fact,), aliases=(f"{d.id}()", short, f"{short}()")), b.lines)


def _unanswerable(b: Bundle, defs: Sequence[Definition], rng: random.Random) -> Question | None:
    options = [d for d in defs if d.kind in ("function", "method", "class") and d.params]
    if not options:
        return None
    d = rng.choice(options)
    text_of = " ".join(line for line in b.lines[b.key(d.id)])
    fakes = [p for p in _FAKE_PARAMS if p not in text_of]
    if not fakes:
        return None
    text = f"What is the default value of the parameter `{rng.choice(fakes)}` of `{d.id}`?"
    return ask(text, Scalar("not_stated", None, asked_as="normalized"), b.lines)

