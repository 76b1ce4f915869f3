"""A synthetic long document with numbered sections (`§n.m`) and questions about it, for benchmarks.

`synthetic_document` writes an annual-report-like text: chapters `§n` with a title, each holding
subsections `§n.m` of a few sentences, every sentence stating one fact (who, which metric, which year,
which value). It stops once the text reaches a token budget measured by the caller's tokenizer.
`questions_about` asks about facts of the document, each naming the section that answers it.
Guarantees: deterministic in (budget, tokenizer, seed); every question's answer is stated verbatim in
the section it names, and only once there (a subsection names each subject once). Not here: grading answers, or real documents (the knowledge task family brings
those; the benchmark takes any document string).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

CHAPTERS = ("Revenue", "Operating costs", "Workforce", "Capital expenditure", "Regional results",
            "Research and development", "Supply chain", "Customers", "Risk factors", "Outlook")
SUBJECTS = ("the Northern division", "the Southern division", "the logistics unit", "the retail arm",
            "the services business", "the components plant in Tampere", "the Lisbon office",
            "the cloud platform team", "the maintenance contracts group", "the export desk")
METRICS = {
    "Revenue": ("revenue", "million euros"),
    "Operating costs": ("operating costs", "million euros"),
    "Workforce": ("headcount", "employees"),
    "Capital expenditure": ("capital expenditure", "million euros"),
    "Regional results": ("operating margin", "percent"),
    "Research and development": ("research spending", "million euros"),
    "Supply chain": ("average delivery time", "days"),
    "Customers": ("active customer accounts", "thousand"),
    "Risk factors": ("open compliance findings", "cases"),
    "Outlook": ("order backlog", "million euros"),
}
CONNECTIVES = ("Compared with the previous year,", "According to the audited figures,", "At year end,",
               "In the reporting period,", "After the reorganisation,", "As disclosed to the board,")


@dataclass(frozen=True)
class Fact:
    """One stated value: `subject` reported `value` `unit` of `metric` in `year`, in `section`."""

    section: str
    subject: str
    metric: str
    unit: str
    year: int
    value: str


@dataclass(frozen=True)
class Document:
    text: str
    facts: tuple[Fact, ...]
    num_tokens: int
    """Tokens of `text` as the budget counted them (the sum over its parts)."""


def _fact_sentence(rng: random.Random, fact: Fact) -> str:
    lead = rng.choice(CONNECTIVES)
    change = rng.choice(("up", "down"))
    delta = f"{rng.randint(1, 40)}.{rng.randint(0, 9)}"
    return (f"{lead} {fact.subject} reported {fact.metric} of {fact.value} {fact.unit} in {fact.year}, "
            f"{change} {delta} percent on {fact.year - 1}.")


def _subsection(rng: random.Random, chapter: int, index: int, title: str) -> tuple[str, list[Fact]]:
    section = f"§{chapter}.{index}"
    metric, unit = METRICS[title]
    facts = []
    for subject in rng.sample(SUBJECTS, rng.randint(3, 6)):  # distinct subjects: one answer per question
        value = f"{rng.randint(1, 999)}.{rng.randint(0, 9)}"
        facts.append(Fact(section, subject, metric, unit, rng.randint(2015, 2024), value))
    body = " ".join(_fact_sentence(rng, f) for f in facts)
    return f"{section} {title}, part {index}. {body}\n", facts


def synthetic_document(num_tokens: int, count_tokens: Callable[[str], int], seed: int = 0) -> Document:
    """A sectioned document of at least `num_tokens` tokens (as `count_tokens` counts each part)."""
    rng = random.Random(seed)
    parts: list[str] = []
    facts: list[Fact] = []
    total, chapter = 0, 0
    while total < num_tokens:
        chapter += 1
        title = CHAPTERS[(chapter - 1) % len(CHAPTERS)]
        heading = f"\n§{chapter} {title}\n"
        parts.append(heading)
        total += count_tokens(heading)
        for index in range(1, rng.randint(3, 7)):
            text, found = _subsection(rng, chapter, index, title)
            parts.append(text)
            facts.extend(found)
            total += count_tokens(text)
            if total >= num_tokens:
                break
    return Document("".join(parts), tuple(facts), total)


def questions_about(document: Document, count: int, seed: int = 0) -> list[tuple[str, str]]:
    """`count` (question, answer) pairs about distinct facts where possible, each naming its section."""
    rng = random.Random(seed)
    facts = list(document.facts)
    rng.shuffle(facts)
    chosen = [facts[i % len(facts)] for i in range(count)]
    return [(f"According to {f.section}, what {f.metric} did {f.subject} report for {f.year}?",
             f"{f.value} {f.unit}") for f in chosen]
