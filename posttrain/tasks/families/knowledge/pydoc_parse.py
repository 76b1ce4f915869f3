"""One page of the Python library reference (Sphinx HTML from Debian's python3-doc) as sections.

`parse_page(name, html)` reads the page's main body with the stdlib `html.parser`: every `<section>`
becomes a section (id `<page>#<anchor>`, or the anchor itself for `module-...` anchors, which are
unique), every Python object description (`<dl class="py ...">` with an anchored `<dt>`) becomes a
section whose id is its anchor (`json.dumps`) and whose title is its signature; paragraphs, list items
and code blocks become paragraphs; `docutils` tables become `Table`s. For each object it also records
what questions are asked about: its kind, its parameters with their defaults, the version of a lone
`New in version X.Y.` note, and its first sentence.

Guarantees: never raises on odd markup (unclosed or stray tags are ignored); sidebars, navigation and
permalink signs are left out. Not here: choosing pages or slicing them to a length (`pydoc.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from posttrain.tasks.families.knowledge.document import Section, Table

_BLOCKS = {"p", "pre", "li", "dt", "th", "td", "caption"}
_VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "col", "area", "source"}
_SKIP_CLASSES = {"headerlink", "sphinxsidebar", "related", "footer"}
_ADDED = re.compile(r"New in version (\d+\.\d+)\.")


@dataclass(frozen=True)
class Definition:
    """What the questions need to know about one documented Python object."""

    id: str
    kind: str
    """`function`, `method`, `class`, `exception`, `data`, `attribute`, ..."""
    params: tuple[tuple[str, str | None], ...]
    """(name, default or None) in signature order."""
    added: str | None
    """`3.5` when the object's own text has exactly one `New in version` note and it is a bare one."""
    first_sentence: str


@dataclass(frozen=True)
class Page:
    """A parsed page: its title, its top-level sections and its object descriptions by id."""

    name: str
    title: str
    sections: tuple[Section, ...]
    definitions: dict[str, Definition]


@dataclass
class _Open:
    """A section being built."""

    id: str
    kind: str = ""
    title: str = ""
    blocks: list[str | Table] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    params: list[tuple[str, str | None]] = field(default_factory=list)


class _PageParser(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.page = page
        self.root = _Open("")
        self.stack: list[tuple[str, _Open | None]] = []  # (tag, section opened by it)
        self.body_depth = 0
        self.skip_depth = 0
        self.text: list[str] | None = None
        self.block_depth = 0
        self.title: list[str] | None = None
        self.rows: list[list[str]] | None = None
        self.param: list[str] | None = None
        self.definitions: dict[str, Definition] = {}

    @property
    def current(self) -> _Open:
        return next((s for _tag, s in reversed(self.stack) if s is not None), self.root)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = set((values.get("class") or "").split())
        if self.body_depth == 0 and not (tag == "div" and "body" in classes):
            return
        if tag in _VOID:
            return
        if tag == "div":
            self.body_depth += 1
        opened = self._open(tag, values, classes)
        self.stack.append((tag, opened))
        if self.skip_depth or classes & _SKIP_CLASSES:
            self.skip_depth += 1
            return
        self._start_text(tag, classes)

    def _open(self, tag: str, values: dict[str, str | None], classes: set[str]) -> _Open | None:
        anchor = values.get("id") or ""
        if tag == "section" and anchor:
            return _Open(anchor if anchor.startswith("module-") else f"{self.page}#{anchor}")
        if tag == "dl" and "py" in classes:
            return _Open("", kind=next((c for c in classes if c != "py"), ""))
        if tag == "dt" and anchor and self.current.kind and not self.current.id:
            self.current.id = anchor
            self.title = []
        return None

    def _start_text(self, tag: str, classes: set[str]) -> None:
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6") and not self.current.title:
            self.title = []
        elif tag == "em" and "sig-param" in classes and self.title is not None:
            self.param = []
        elif tag == "span" and "default_value" in classes and self.param is not None:
            self.param.append("\x00")
        elif tag == "table":
            self.rows = []
        elif tag == "tr" and self.rows is not None:
            self.rows.append([])
        elif tag in _BLOCKS and self.title is None:
            if self.block_depth == 0:
                self.text = []
            self.block_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self.body_depth == 0 or not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            open_tag, opened = self.stack.pop()
            self._close(open_tag, opened)
            if open_tag == tag:
                break

    def _close(self, tag: str, opened: _Open | None) -> None:
        if tag == "div":
            self.body_depth -= 1
        if self.skip_depth:
            self.skip_depth -= 1
            return
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6", "dt") and self.title is not None:
            self.current.title = self.current.title or _squash("".join(self.title))
            self.title = None
        elif tag == "em" and self.param is not None:
            name, _, default = "".join(self.param).partition("\x00")
            self.current.params.append((name.strip().split("=")[0].strip(), default.strip() or None))
            self.param = None
        elif tag in ("th", "td") and self.rows and self.text is not None:
            self.rows[-1].append(_squash("".join(self.text)).replace("|", "/"))
        if tag in _BLOCKS and self.block_depth:
            self.block_depth -= 1
            if self.block_depth == 0 and self.text is not None and tag not in ("th", "td"):
                text = "".join(self.text).strip() if tag == "pre" else _squash("".join(self.text))
                if text and self.rows is None:
                    self.current.blocks.append(text)
                self.text = None
        if tag == "table" and self.rows is not None:
            self._add_table(self.rows)
            self.rows = None
        if opened is not None:
            self._finish(opened)

    def _add_table(self, rows: list[list[str]]) -> None:
        rows = [r for r in rows if r]
        if len(rows) >= 2:
            width = max(len(r) for r in rows)
            padded = [tuple(r + [""] * (width - len(r))) for r in rows]
            self.current.blocks.append(Table(padded[0], tuple(padded[1:])))

    def _finish(self, opened: _Open) -> None:
        parent = self.current
        if not opened.id:  # an object description without an anchor: its text belongs to its parent
            parent.blocks.extend(opened.blocks)
            parent.children.extend(opened.children)
            return
        section = Section(opened.id, opened.title, tuple(opened.blocks), tuple(opened.children))
        parent.children.append(section)
        if opened.kind:
            self.definitions[opened.id] = _definition(opened)

    def handle_data(self, data: str) -> None:
        if self.body_depth == 0 or self.skip_depth:
            return
        if self.param is not None:
            self.param.append(data)
        if self.title is not None:
            self.title.append(data)
        elif self.text is not None:
            self.text.append(data)


def _definition(opened: _Open) -> Definition:
    own = [b for b in opened.blocks if isinstance(b, str)]
    notes = [b for b in own if "New in version" in b]
    added = _ADDED.fullmatch(notes[0]) if len(notes) == 1 else None
    first = own[0].split(". ")[0].rstrip(".") + "." if own else ""
    return Definition(opened.id, opened.kind, tuple(opened.params), added.group(1) if added else None, first)


def _squash(text: str) -> str:
    return " ".join(text.replace("¶", "").split())


def parse_page(name: str, html: str) -> Page:
    """The sections and object descriptions of one library page (`name` is its file stem)."""
    parser = _PageParser(name)
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError):  # html.parser's complaints about broken markup
        pass
    while parser.stack:
        tag, opened = parser.stack.pop()
        parser._close(tag, opened)
    sections = tuple(parser.root.children)
    title = sections[0].title if sections else name
    return Page(name, title, sections, parser.definitions)
