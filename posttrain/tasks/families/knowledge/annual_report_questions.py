"""Questions about annual reports, one maker per question type (`QUESTIONS`).

- lookup: one final table figure (a cell no note restates) or a regional headcount.
- aggregation: combined revenue of a year, a segment's operating margin (two tables), a segment's change
  between two years, or the segment ranked first - on final figures only.
- exception: a figure a note restates (the table cell and the note are both evidence), directly or
  inside a margin.
- comparison (two reports): one segment's figure at company A minus company B, or which company employs
  more people in a region.
- extraction: three or four governance facts as JSON, each with its own citation.
- unanswerable: a segment the company does not have, a year the report does not cover, or a figure
  the report never gives (dividends, buy-backs, research spending, emissions).

Every figure question uses the same wording ("as finally reported"), so wording never tells a lookup
from an exception. Not here: the documents (`annual_report.py`).
"""

from __future__ import annotations

import random
from functools import partial

from posttrain.tasks.families.knowledge.annual_report import (
    METRICS,
    REGIONS,
    SEGMENTS,
    Report,
    Restatement,
    cell_needles,
    restated_needles,
)
from posttrain.tasks.families.knowledge.corpus import Bundle, QuestionMaker
from posttrain.tasks.families.knowledge.names import money
from posttrain.tasks.families.knowledge.questions import (
    Fact,
    FieldSpec,
    Question,
    Scalar,
    ask,
    ask_fields,
    choose_fields,
    one_of,
)

MARGIN_TOL = 0.051
"""Margins are asked rounded to one decimal; this absolute tolerance accepts the other rounding."""


def _ask_figure(metric: str, segment: str, year: int) -> str:
    return f"What was the {METRICS[metric]} of the {segment} segment for fiscal {year}, in USD million, as finally reported?"


def _cell(b: Bundle, metric: str, segment: str, year: int, doc: int = 0) -> Fact:
    value = b.data[doc].figures[metric][(segment, year)]
    return Fact(f"{METRICS[metric]} of {segment} in fiscal {year} printed as {money(value)}",
                cell_needles(segment, value), (b.key(metric, doc),))  # fmt: skip


def _note(b: Bundle, note: Restatement) -> Fact:
    return Fact(f"{METRICS[note.metric]} of {note.segment} in fiscal {note.year} restated to {money(note.new)}",
                restated_needles(note), (b.key(note.handle),))  # fmt: skip


def _headcount(b: Bundle, region: str, year: int, doc: int = 0) -> Fact:
    value = b.data[doc].headcount[(region, year)]
    return Fact(f"{region} employees at the end of fiscal {year}: {money(value)}", cell_needles(region, value),
                (b.key("headcount", doc),))  # fmt: skip


def lookup(b: Bundle, rng: random.Random) -> Question:
    report: Report = b.data[0]

    def figure() -> Question:
        metric = rng.choice(list(METRICS))
        segment, year = rng.choice([(s, y) for s in report.segments for y in report.years if report.clean(metric, s, y)])
        value = report.figures[metric][(segment, year)]
        spec = Scalar("numeric", value, (_cell(b, metric, segment, year),), shown=money(value))
        return ask(_ask_figure(metric, segment, year), spec, b.lines)

    def employees() -> Question:
        region, year = rng.choice(list(report.headcount))
        value = report.headcount[(region, year)]
        text = f"How many employees did the company have in {region} at the end of fiscal {year}?"
        return ask(text, Scalar("numeric", value, (_headcount(b, region, year),), shown=money(value)), b.lines)

    return one_of(rng, figure, figure, employees)


def aggregation(b: Bundle, rng: random.Random) -> Question:
    report: Report = b.data[0]
    return one_of(rng, partial(_total, b, report, rng), partial(_margin, b, report, rng),
                  partial(_change, b, report, rng), partial(_ranking, b, report, rng))  # fmt: skip


def _total(b: Bundle, report: Report, rng: random.Random) -> Question | None:
    years = [y for y in report.years if all(report.clean("rev", s, y) for s in report.segments)]
    if not years:
        return None
    year = rng.choice(years)
    value = sum(report.figures["rev"][(s, year)] for s in report.segments)
    text = f"What was the combined revenue of all segments for fiscal {year}, in USD million, as finally reported?"
    facts = tuple(_cell(b, "rev", s, year) for s in report.segments)
    return ask(text, Scalar("numeric", value, facts, shown=money(value)), b.lines)


def _margin(b: Bundle, report: Report, rng: random.Random) -> Question | None:
    cells = [(s, y) for s in report.segments for y in report.years
             if report.clean("rev", s, y) and report.clean("opinc", s, y)]  # fmt: skip
    if not cells:
        return None
    segment, year = rng.choice(cells)
    value = round(100 * report.figures["opinc"][(segment, year)] / report.figures["rev"][(segment, year)], 1)
    text = (f"What was the operating margin (operating income divided by revenue) of the {segment} segment "
            f"for fiscal {year}, in percent rounded to one decimal, as finally reported?")  # fmt: skip
    facts = (_cell(b, "rev", segment, year), _cell(b, "opinc", segment, year))
    return ask(text, Scalar("numeric", value, facts, abs_tol=MARGIN_TOL, shown=f"{value:.1f}%"), b.lines)


def _change(b: Bundle, report: Report, rng: random.Random) -> Question | None:
    metric = rng.choice(list(METRICS))
    pairs = [(s, y) for s in report.segments for y in report.years[1:]
             if report.clean(metric, s, y) and report.clean(metric, s, y - 1)]  # fmt: skip
    if not pairs:
        return None
    segment, year = rng.choice(pairs)
    figures = report.figures[metric]
    value = figures[(segment, year)] - figures[(segment, year - 1)]
    text = (f"By how much did the {METRICS[metric]} of the {segment} segment change from fiscal {year - 1} to "
            f"fiscal {year}, in USD million, as finally reported? Give a decrease as a negative number.")  # fmt: skip
    facts = (_cell(b, metric, segment, year - 1), _cell(b, metric, segment, year))
    return ask(text, Scalar("numeric", value, facts), b.lines)


def _ranking(b: Bundle, report: Report, rng: random.Random) -> Question | None:
    metric = rng.choice(list(METRICS))
    years = [y for y in report.years if all(report.clean(metric, s, y) for s in report.segments)]
    if not years:
        return None
    year = rng.choice(years)
    ranked = sorted(report.segments, key=lambda s: report.figures[metric][(s, year)], reverse=True)
    if report.figures[metric][(ranked[0], year)] == report.figures[metric][(ranked[1], year)]:
        return None
    text = f"Which segment reported the highest {METRICS[metric]} for fiscal {year}, as finally reported?"
    facts = tuple(_cell(b, metric, s, year) for s in report.segments)
    return ask(text, Scalar("normalized", ranked[0], facts), b.lines)


def exception(b: Bundle, rng: random.Random) -> Question:
    report: Report = b.data[0]
    note = rng.choice(report.restatements)

    def direct() -> Question:
        facts = (_cell(b, note.metric, note.segment, note.year), _note(b, note))
        spec = Scalar("numeric", note.new, facts, shown=money(note.new))
        return ask(_ask_figure(note.metric, note.segment, note.year), spec, b.lines)

    def margin() -> Question | None:
        other = "opinc" if note.metric == "rev" else "rev"
        if not report.clean(other, note.segment, note.year):
            return None
        figures = {note.metric: note.new, other: report.figures[other][(note.segment, note.year)]}
        value = round(100 * figures["opinc"] / figures["rev"], 1)
        text = (f"What was the operating margin (operating income divided by revenue) of the {note.segment} "
                f"segment for fiscal {note.year}, in percent rounded to one decimal, as finally reported?")  # fmt: skip
        facts = (_cell(b, "rev", note.segment, note.year), _cell(b, "opinc", note.segment, note.year), _note(b, note))
        return ask(text, Scalar("numeric", value, facts, abs_tol=MARGIN_TOL, shown=f"{value:.1f}%"), b.lines)

    return one_of(rng, direct, direct, margin)


def comparison(b: Bundle, rng: random.Random) -> Question:
    first: Report = b.data[0]
    second: Report = b.data[1]
    names = f"{first.company} (Document A)", f"{second.company} (Document B)"

    def difference() -> Question | None:
        metric = rng.choice(list(METRICS))
        cells = [(s, y) for s in set(first.segments) & set(second.segments) for y in first.years
                 if first.clean(metric, s, y) and second.clean(metric, s, y)]  # fmt: skip
        if not cells:
            return None
        segment, year = rng.choice(sorted(cells))
        value = first.figures[metric][(segment, year)] - second.figures[metric][(segment, year)]
        text = (f"For fiscal {year}, what is the {METRICS[metric]} of the {segment} segment at {names[0]} minus "
                f"that at {names[1]}, in USD million, as finally reported?")  # fmt: skip
        facts = (_cell(b, metric, segment, year, 0), _cell(b, metric, segment, year, 1))
        return ask(text, Scalar("numeric", value, facts), b.lines)

    def more_staff() -> Question | None:
        region, year = rng.choice(list(first.headcount))
        a, c = first.headcount[(region, year)], second.headcount[(region, year)]
        if a == c:
            return None
        winner, letter = (first.company, "A") if a > c else (second.company, "B")
        text = f"Which company had more employees in {region} at the end of fiscal {year}: {names[0]} or {names[1]}?"
        facts = (_headcount(b, region, year, 0), _headcount(b, region, year, 1))
        return ask(text, Scalar("normalized", winner, facts, aliases=(f"{winner} (Document {letter})",)), b.lines)

    return one_of(rng, difference, difference, more_staff)


def extraction(b: Bundle, rng: random.Random) -> Question:
    report: Report = b.data[0]
    leaders, corporate = b.key("leadership"), b.key("corporate")
    people = report.people
    fields = {
        "chief_executive": FieldSpec("normalized", people["ceo"],
                                     (Fact("CEO", (people["ceo"], "Chief Executive Officer"), (leaders,)),)),
        "chief_financial_officer": FieldSpec("normalized", people["cfo"],
                                             (Fact("CFO", (people["cfo"], "Chief Financial Officer"), (leaders,)),)),
        "board_chair": FieldSpec("normalized", people["chair"], (Fact("chair", (people["chair"],), (leaders,)),)),
        "auditor": FieldSpec("normalized", report.auditor,
                             (Fact("auditor", (f"audited by {report.auditor}",), (b.key("auditor"),)),)),
        "headquarters_city": FieldSpec("normalized", report.city,
                                       (Fact("headquarters", (f"headquarters of the company are in {report.city}",),
                                             (corporate,)),)),
        "year_founded": FieldSpec("numeric", report.founded,
                                  (Fact("founded", (f"was founded in {report.founded}",), (corporate,)),)),
    }  # fmt: skip
    chosen = choose_fields(fields, rng)
    text = f"Extract these facts about {report.company} from the report: {', '.join(chosen)}."
    return ask_fields(text, {name: fields[name] for name in chosen}, b.lines)


_UNREPORTED = (
    "What dividend per share did the company pay for fiscal {year}, in USD?",
    "How much did the company spend on research and development in fiscal {year}, in USD million?",
    "How many shares did the company buy back during fiscal {year}?",
    "What were the company's direct greenhouse gas emissions in fiscal {year}, in tonnes?",
    "How many patents did the company hold at the end of fiscal {year}?",
)


def unanswerable(b: Bundle, rng: random.Random) -> Question:
    report: Report = b.data[0]
    missing = [s for s in SEGMENTS if s not in report.segments]
    metric = rng.choice(list(METRICS))
    texts = (
        _ask_figure(metric, rng.choice(missing), rng.choice(report.years)),
        _ask_figure(metric, rng.choice(report.segments), report.years[0] - rng.randint(2, 6)),
        rng.choice(_UNREPORTED).format(year=rng.choice(report.years)),
        f"How many employees did the company have in {rng.choice(REGIONS)} at the end of fiscal {report.years[0] - 3}?",
    )
    return ask(rng.choice(texts), Scalar("not_stated", None, asked_as="numeric"), b.lines)


QUESTIONS: dict[str, QuestionMaker] = {
    "lookup": lookup, "aggregation": aggregation, "exception": exception, "comparison": comparison,
    "extraction": extraction, "unanswerable": unanswerable,
}  # fmt: skip
