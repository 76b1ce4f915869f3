"""Filler prose: realistic, varied sections that surround the evidence and carry none of it.

A `Vocabulary` is a corpus's topics (titles and sentence templates with `{slot}` fields), the words
each slot draws from, sentence openers and closing clauses. `FillerWriter.section` writes one section
on one topic: five to nine of its sentences (none twice; across the document the least used templates
come first), fresh slot draws, in two or three paragraphs. Filler never states a fact: templates and
slot words hold no digits (tested), and any sentence that happens to contain a forbidden string (a
name or figure some question rests on) is dropped as it is written - so a filler section can never be
where the evidence of a question sits.

Guarantees: deterministic in the RNG; titles are not repeated within one `FillerWriter`. Not here: the
evidence sections (each corpus writes those) or sizing a document (`sizing.py`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from posttrain.tasks.families.knowledge.document import Section, estimate_tokens

_NEUTRAL = "This section has no further details."
_TITLE_SUFFIXES = ("further considerations", "update", "current practice", "outlook", "approach",
                   "priorities", "review", "guidance")  # fmt: skip


@dataclass(frozen=True)
class Topic:
    """A filler topic: section titles to pick from and sentence templates."""

    titles: tuple[str, ...]
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class Vocabulary:
    """A corpus's filler: its topics and the words each `{slot}` draws from."""

    topics: tuple[Topic, ...]
    slots: Mapping[str, tuple[str, ...]]
    openers: tuple[str, ...] = ("in practice,", "as a rule,", "in addition,", "where possible,", "at the same time,",
                                "for this reason,", "equally,", "over time,")  # fmt: skip
    """Phrases that may open a sentence (one sentence in five)."""
    tails: tuple[str, ...] = ()
    """Clauses (slots allowed) that may close a sentence before its full stop (one sentence in three)."""


@dataclass
class FillerWriter:
    """Writes filler sections for one document (keeps its titles distinct)."""

    vocabulary: Vocabulary
    rng: random.Random
    subject: str
    """What `{subject}` becomes: the company, the organisation, the device."""
    forbidden: Sequence[str] = ()
    """Strings no filler sentence may contain (the evidence's names and figures)."""
    used_titles: set[str] = field(default_factory=set)
    uses: Counter[str] = field(default_factory=Counter)
    """How often each template has been written (the least used are picked first)."""

    def section(self, handle: str, topic: Topic | None = None) -> Section:
        """One filler section with the drafting id `handle`: its topic's sentences (none twice) in two or
        three paragraphs."""
        topic = topic or self.rng.choice(self.vocabulary.topics)
        templates = self._pick(topic, self.rng.randint(5, 9))
        cuts = sorted(self.rng.sample(range(2, len(templates) - 1), min(self.rng.randint(1, 2), len(templates) - 3)))
        bounds = [0, *cuts, len(templates)]
        paragraphs = (self._join(templates[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
        return Section(id=handle, title=self._title(topic), blocks=tuple(p for p in paragraphs if p) or (_NEUTRAL,))

    def paragraph(self, topic: Topic) -> str:
        """Three to six distinct sentences of `topic`."""
        for _ in range(8):
            text = self._join(self._pick(topic, self.rng.randint(3, 6)))
            if text:
                return text
        return _NEUTRAL

    def _pick(self, topic: Topic, count: int) -> list[str]:
        """`count` distinct templates of `topic`, the least written first (ties broken at random)."""
        order = sorted(topic.sentences, key=lambda t: (self.uses[t], self.rng.random()))[:count]
        self.uses.update(order)
        return self.rng.sample(order, len(order))

    def _join(self, templates: Sequence[str]) -> str:
        """The sentences of `templates`, without any that holds a forbidden string (possibly none)."""
        sentences = [self._fill(t) for t in templates]
        return " ".join(s for s in sentences if not any(bad in s for bad in self.forbidden))

    def _fill(self, template: str) -> str:
        vocabulary = self.vocabulary
        if vocabulary.tails and template.endswith(".") and self.rng.random() < 0.35:
            template = f"{template[:-1]}, {self.rng.choice(vocabulary.tails)}."
        words = {name: self.rng.choice(options) for name, options in vocabulary.slots.items()
                 if "{" + name + "}" in template}  # fmt: skip
        text = template.format(subject=self.subject, **words)
        if self.vocabulary.openers and self.rng.random() < 0.2:
            text = f"{self.rng.choice(self.vocabulary.openers)} {text}"
        return text[0].upper() + text[1:]

    def _title(self, topic: Topic) -> str:
        fresh = [t for t in topic.titles if t not in self.used_titles]
        title = self.rng.choice(fresh) if fresh else self._suffixed(topic)
        self.used_titles.add(title)
        return title

    def _suffixed(self, topic: Topic) -> str:
        for _ in range(64):
            first, second = self.rng.sample(_TITLE_SUFFIXES, 2)
            for title in (f"{self.rng.choice(topic.titles)}: {first}",
                          f"{self.rng.choice(topic.titles)}: {first} and {second}"):  # fmt: skip
                if title not in self.used_titles:
                    return title
        return f"{topic.titles[0]}: notes"

    def sections_of_size(self, prefix: str, num_tokens: int) -> list[Section]:
        """Filler sections (drafting ids `<prefix>1`, `<prefix>2`, ...) of about `num_tokens` tokens."""
        out: list[Section] = []
        total = 0
        while total < num_tokens:
            section = self.section(f"{prefix}{len(out) + 1}")
            size = estimate_tokens(" ".join([f"## §0.0 {section.title}", *map(str, section.blocks)]))
            if total + size - num_tokens > num_tokens - total:  # the last section: keep it only if that is closer
                break
            total += size
            out.append(section)
        return out


def spread(rng: random.Random, items: Sequence[Section], slots: int) -> list[list[Section]]:
    """Deal `items` over `slots` lists at random (so filler lands between the evidence chapters)."""
    dealt: list[list[Section]] = [[] for _ in range(slots)]
    for item in items:
        dealt[rng.randrange(slots)].append(item)
    return dealt
