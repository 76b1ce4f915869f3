"""Questions about documents: facts located in sections, gold records, gold responses and the prompt.

A corpus states a question's facts as `Fact`s: words for people, `needles` (strings that all appear on
ONE line of a section that states the fact) and `home` (the cite keys where the generator put it).
`ask`/`ask_fields` locate every fact in the rendered documents' own section lines: the gold evidence is
where the text really contains the fact, and a fact missing from its home is a generator bug
(`EvidenceError`). The gold response cites one section per fact and scores 1.

`prompt` is the rendered documents first, then the question, then the response-format instruction, so
questions on one document share its prefix. Not here: grading (`posttrain.verify.citations`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from posttrain.verify.citation_gold import (
    NOT_STATED,
    AnswerType,
    CitationGold,
    EvidenceFact,
    FieldGold,
    FieldType,
)

Lines = Mapping[str, Sequence[str]]
"""Cite key -> the section's own lines (`document.section_lines`)."""


class EvidenceError(RuntimeError):
    """A fact is not where its generator put it (a bug in a corpus, never the model's fault)."""


@dataclass(frozen=True)
class Fact:
    """One fact a question needs: what it says, how to find it, and where it was put."""

    text: str
    needles: tuple[str, ...]
    home: tuple[str, ...]
    pinned: bool = False
    """The evidence is the home only, even where other sections contain the needles (a real corpus's
    text, e.g. `New in version 3.5.`, repeats across sections that say it of other things)."""


@dataclass(frozen=True)
class Question:
    """A question with its gold record and a gold response."""

    text: str
    gold: CitationGold
    answer: str
    asked_as: AnswerType
    """The answer type the prompt's instruction describes (an unanswerable question looks answerable)."""


@dataclass(frozen=True)
class FieldSpec:
    """One field of a structured-extraction question."""

    type: FieldType
    value: str | int | float
    facts: tuple[Fact, ...]
    aliases: tuple[str, ...] = ()
    abs_tol: float = 1e-9


@dataclass(frozen=True)
class Scalar:
    """What `ask` needs besides the question text."""

    type: AnswerType
    value: str | int | float | None
    facts: tuple[Fact, ...] = ()
    aliases: tuple[str, ...] = ()
    abs_tol: float = 1e-9
    shown: str | None = None
    """How the gold response writes the value (default: the value as text)."""
    asked_as: AnswerType | None = None
    """The type the prompt describes, when it is not `type` (unanswerable questions)."""


def contains(line: str, fact: Fact) -> bool:
    """Whether one line states `fact` (every needle appears in it)."""
    return all(needle in line for needle in fact.needles)


def locate(fact: Fact, lines: Lines) -> tuple[str, ...]:
    """Every section of the fact's document whose own lines state `fact`; its home must be among them."""
    if fact.pinned:
        found = tuple(key for key in fact.home if any(contains(line, fact) for line in lines.get(key, ())))
    else:  # a fact about document A is looked for in document A only (a pair's documents repeat text)
        documents = {key.partition("§")[0] for key in fact.home}
        found = tuple(key for key, own in lines.items()
                      if key.partition("§")[0] in documents and any(contains(line, fact) for line in own))  # fmt: skip
    missing = [key for key in fact.home if key not in found]
    if missing:
        raise EvidenceError(f"fact {fact.text!r} is not stated in {missing} (its needles {fact.needles})")
    return found


def evidence(facts: Sequence[Fact], lines: Lines) -> tuple[EvidenceFact, ...]:
    return tuple(EvidenceFact(fact=f.text, sections=locate(f, lines)) for f in facts)


def gold_cites(facts: Sequence[Fact]) -> list[str]:
    """One citation per fact (its first home), without repeats, in order."""
    return list(dict.fromkeys(f.home[0] for f in facts))


def ask(text: str, spec: Scalar, lines: Lines) -> Question:
    """A scalar question: gold record and gold response `Answer: ...` / `Citations: ...`."""
    gold = CitationGold(type=spec.type, answer=spec.value, aliases=spec.aliases, abs_tol=spec.abs_tol,
                        evidence=evidence(spec.facts, lines))  # fmt: skip
    shown = spec.shown if spec.shown is not None else (NOT_STATED if spec.value is None else str(spec.value))
    cites = ", ".join(gold_cites(spec.facts)) or "none"
    return Question(text, gold, f"Answer: {shown}\nCitations: {cites}", spec.asked_as or spec.type)


def choose_fields(fields: Mapping[str, FieldSpec], rng: random.Random) -> list[str]:
    """Three or four of `fields` (all when fewer), in their declared order: the keys an extraction asks for."""
    names = list(fields)
    return sorted(rng.sample(names, min(len(names), rng.randint(3, 4))), key=names.index)


def ask_fields(text: str, fields: Mapping[str, FieldSpec], lines: Lines) -> Question:
    """A structured-extraction question graded field by field."""
    golds = {
        name: FieldGold(type=f.type, answer=f.value, aliases=f.aliases, abs_tol=f.abs_tol,
                        evidence=evidence(f.facts, lines))  # fmt: skip
        for name, f in fields.items()
    }
    response = {name: {"value": f.value, "cite": gold_cites(f.facts)[0]} for name, f in fields.items()}
    gold = CitationGold(type="json", fields=golds)
    return Question(text, gold, "Answer: " + json.dumps(response, ensure_ascii=False), "json")


_CITE_RULE = ("then one line `Citations:` with the ids of the sections whose text states the facts you used, "
              "written as in their headings and separated by commas (e.g. {example}); cite nothing else.")  # fmt: skip
_SCALAR_FORMAT = (
    "Answer using only the document{s} above. End your reply with one line `Answer: <answer>`, {cite}\n"
    "{how}\nIf the document{s} {verb} not state the answer, reply `Answer: not stated` and `Citations: none`."
)
_HOW: dict[str, str] = {
    "numeric": "The answer is one number (a unit is fine; write no other number on that line).",
    "yes_no": "The answer is one word: yes or no.",
    "exact": "Write the answer exactly as the document{s} write{verb} it.",
    "normalized": "The answer is a short phrase: a name or a value as written in the document{s}.",
}


def format_instruction(answer_type: AnswerType, num_documents: int, example: str,
                       field_names: Sequence[str] = ()) -> str:  # fmt: skip
    """The response-format instruction closing every prompt (`citation_parse` reads what it asks for)."""
    plural = "s" if num_documents > 1 else ""
    if answer_type == "json":
        keys = ", ".join(f'"{name}"' for name in field_names)
        return (f"Answer using only the document{plural} above. End your reply with `Answer:` followed by "
                f"one JSON object on one line with exactly the keys {keys}; each value is an object "
                f'{{"value": <the value>, "cite": "<id of the section that states it, e.g. {example}>"}}. '
                "Numbers are plain numbers without units.")  # fmt: skip
    how = _HOW.get(answer_type, _HOW["normalized"]).format(s=plural, verb="" if plural else "s")
    cite = _CITE_RULE.format(example=example)
    return _SCALAR_FORMAT.format(s=plural, cite=cite, how=how, verb="do" if plural else "does")


def prompt(document_text: str, question: Question, num_documents: int, example: str) -> str:
    """Documents first, then the question, then the format instruction (shared prefix = the documents)."""
    names = list(question.gold.fields)
    instruction = format_instruction(question.asked_as, num_documents, example, names)
    return f"{document_text}\n\n---\n\nQuestion: {question.text}\n\n{instruction}"


def one_of(rng: random.Random, *options: Callable[[], Question | None]) -> Question:
    """The question of the first option, in random order, that can be asked of this document."""
    for option in rng.sample(options, len(options)):
        question = option()
        if question is not None:
            return question
    raise EvidenceError("no question of this type can be asked of this document")


def fact_list(items: Sequence[str]) -> str:
    """`a, b and c`."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"
