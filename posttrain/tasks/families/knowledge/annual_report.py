"""Corpus `annual_report`: company annual reports with segment tables, a workforce table, governance
facts and notes that restate figures of the tables.

A report covers two or three fiscal years. Its evidence: revenue and operating income by segment (two
tables, different sections; revenue is always at least 400 and operating income below 400 USD million,
so a figure never appears in the wrong table), employees by region, leadership, auditor and corporate
facts, and restatement notes (`Restatement of ...`) that override one table cell each - 1 to 3 per
report, late in the document. Filler chapters (strategy, markets, risks, sustainability, people,
accounting policy) are dealt between the evidence. Pairs (comparison) are two companies reporting the
same years on at least one shared segment and the same regions.

Question makers live in `annual_report_questions.py`. Guarantees: deterministic in the RNG; no cell is
restated twice; the restated value differs from the table's. Not here: question wording.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from posttrain.tasks.families.knowledge.annual_report_prose import VOCABULARY
from posttrain.tasks.families.knowledge.corpus import Draft
from posttrain.tasks.families.knowledge.document import Document, Section, Table, estimate_tokens, render
from posttrain.tasks.families.knowledge.names import CITIES, money, organisation, person
from posttrain.tasks.families.knowledge.prose import FillerWriter, spread

SEGMENTS = ("Cloud Services", "Industrial Equipment", "Consumer Devices", "Logistics", "Healthcare Solutions",
            "Energy Systems", "Financial Software", "Specialty Materials", "Retail Platforms",
            "Water Technologies", "Aerospace Components", "Agricultural Products")  # fmt: skip
REGIONS = ("North America", "Europe", "Asia Pacific", "Latin America", "Middle East and Africa")
AUDITORS = ("Halloway & Crane LLP", "Brightman Assurance", "Kettering Audit Partners", "Vance Morrow & Co",
            "Oakridge Assurance LLP", "Pemberton Lowe Auditors")  # fmt: skip
METRICS = {"rev": "revenue", "opinc": "operating income"}


@dataclass(frozen=True)
class Restatement:
    """A note overriding one cell of a segment table."""

    metric: str
    """`rev` or `opinc`: which table."""
    segment: str
    year: int
    old: int
    new: int
    handle: str
    """The drafting id of the note's section."""


@dataclass(frozen=True)
class Report:
    """The data one report is written from."""

    company: str
    years: tuple[int, ...]
    segments: tuple[str, ...]
    figures: dict[str, dict[tuple[str, int], int]]
    """Metric (`rev`, `opinc`) -> (segment, year) -> USD million, as the tables print them."""
    headcount: dict[tuple[str, int], int]
    """(region, year) -> employees at year end."""
    people: dict[str, str]
    """Role (`ceo`, `cfo`, `chair`) -> name."""
    auditor: str
    city: str
    founded: int
    restatements: tuple[Restatement, ...]

    @property
    def year(self) -> int:
        return self.years[-1]

    def restated(self, metric: str, segment: str, year: int) -> Restatement | None:
        return next((r for r in self.restatements
                     if (r.metric, r.segment, r.year) == (metric, segment, year)), None)  # fmt: skip

    def clean(self, metric: str, segment: str, year: int) -> bool:
        """Whether the table cell is final (no note restates it)."""
        return self.restated(metric, segment, year) is None


def _scale(num_tokens: int) -> tuple[int, int, int]:
    """Segments, years and restatements by document size."""
    if num_tokens < 3_000:
        return 3, 2, 1
    if num_tokens < 12_000:
        return 4, 3, 2
    return 6, 3, 3


def make_report(rng: random.Random, num_tokens: int, company: str, years: tuple[int, ...],
                segments: tuple[str, ...]) -> Report:  # fmt: skip
    """Random figures, people and restatements for a report."""
    figures: dict[str, dict[tuple[str, int], int]] = {"rev": {}, "opinc": {}}
    for segment in segments:
        revenue, margin = rng.uniform(450, 2_000), rng.uniform(0.03, 0.15)
        for year in years:
            revenue = max(400.0, revenue * rng.uniform(0.88, 1.18))
            figures["rev"][(segment, year)] = round(revenue)
            figures["opinc"][(segment, year)] = min(395, max(20, round(revenue * margin * rng.uniform(0.8, 1.2))))
    headcount = {}
    for region in REGIONS:
        staff = rng.uniform(1_500, 30_000)
        for year in years[-2:]:
            staff *= rng.uniform(0.92, 1.12)
            headcount[(region, year)] = round(staff)
    taken: set[str] = set()
    people = {role: person(rng, taken) for role in ("ceo", "cfo", "chair")}
    cells = rng.sample([(m, s, y) for m in figures for s in segments for y in years], _scale(num_tokens)[2])
    restatements = []
    for number, (metric, segment, year) in enumerate(cells):
        old = figures[metric][(segment, year)]
        change = max(1, round(old * rng.uniform(0.02, 0.09))) * rng.choice((-1, 1))
        restatements.append(Restatement(metric, segment, year, old, old + change, f"restate{number}"))
    return Report(company, years, segments, figures, headcount, people, rng.choice(AUDITORS),
                  rng.choice(CITIES), rng.randint(1901, 1994), tuple(restatements))  # fmt: skip


def draft(rng: random.Random, num_tokens: int) -> Draft:
    """One annual report of about `num_tokens` tokens."""
    num_segments, num_years, _ = _scale(num_tokens)
    last = rng.randint(2016, 2024)
    years = tuple(range(last - num_years + 1, last + 1))
    report = make_report(rng, num_tokens, organisation(rng), years, tuple(rng.sample(SEGMENTS, num_segments)))
    return write(rng, report, num_tokens), report


def draft_pair(rng: random.Random, num_tokens: int) -> tuple[Draft, Draft]:
    """Two companies' reports for the same years, sharing at least one segment."""
    num_segments, num_years, _ = _scale(num_tokens)
    last = rng.randint(2016, 2024)
    years = tuple(range(last - num_years + 1, last + 1))
    first = tuple(rng.sample(SEGMENTS, num_segments))
    shared = rng.choice(first)
    second = (shared, *rng.sample([s for s in SEGMENTS if s != shared], num_segments - 1))
    company_a = organisation(rng)
    report_a = make_report(rng, num_tokens, company_a, years, first)
    report_b = make_report(rng, num_tokens, organisation(rng, avoid=company_a), years, tuple(rng.sample(second, len(second))))
    return (write(rng, report_a, num_tokens), report_a), (write(rng, report_b, num_tokens), report_b)


def write(rng: random.Random, report: Report, num_tokens: int) -> Document:
    """The report as a drafted document: evidence chapters with filler dealt between them."""
    forbidden = (*report.people.values(), report.auditor, report.city)
    writer = FillerWriter(VOCABULARY, rng, subject=rng.choice(("the Company", "the Group", report.company)),
                          forbidden=forbidden)  # fmt: skip
    core = _core_chapters(report, writer)
    title = f"{report.company} - Annual Report for fiscal {report.year}"
    preamble = f"This report covers the fiscal years {report.years[0]} to {report.year}. Figures are in USD million."
    core_tokens = estimate_tokens(render([Document(title, tuple(core), preamble)]))
    filler = spread(rng, writer.sections_of_size("f", num_tokens - core_tokens), len(core))
    chapters = []
    for chapter, extra in zip(core, filler, strict=True):
        children = [*chapter.children, *extra]
        if chapter.id == "notes":
            rng.shuffle(children)
        chapters.append(Section(chapter.id, chapter.title, chapter.blocks, tuple(children)))
    return Document(title, tuple(chapters), preamble)


def _core_chapters(report: Report, writer: FillerWriter) -> list[Section]:
    topics = writer.vocabulary.topics
    segments = ", ".join(report.segments[:-1]) + f" and {report.segments[-1]}"
    overview = f"{report.company} reports its results through {len(report.segments)} segments: {segments}."
    return [
        Section("letter", "Letter to shareholders", (writer.paragraph(topics[0]),)),
        Section("overview", "Business overview", (overview,)),
        Section("results", "Segment results", ("The tables below present segment figures as originally reported.",),
                (_table_section(report, "rev"), _table_section(report, "opinc"))),  # fmt: skip
        Section("people", "Our people", ("This chapter reports the workforce by region.",), (_headcount_section(report),)),
        Section("risks", "Risk management", ("This chapter describes the principal risks and how they are managed.",)),
        Section("governance", "Corporate governance", (), _governance(report)),
        Section("notes", "Notes to the financial statements", ("The notes below form part of the financial statements.",),
                tuple(_note(report, r) for r in report.restatements)),  # fmt: skip
    ]


def _table_section(report: Report, metric: str) -> Section:
    name = METRICS[metric]
    header = ("Segment", *(f"FY{y}" for y in report.years))
    rows = tuple((s, *(money(report.figures[metric][(s, y)]) for y in report.years)) for s in report.segments)
    table = Table(header, rows, caption=f"Table: {name.capitalize()} by segment (USD million)")
    intro = f"{name.capitalize()} by segment for the fiscal years {report.years[0]} to {report.year}."
    return Section(metric, f"{name.capitalize()} by segment", (intro, table))


def _headcount_section(report: Report) -> Section:
    years = report.years[-2:]
    rows = tuple((r, *(money(report.headcount[(r, y)]) for y in years)) for r in REGIONS)
    table = Table(("Region", *(f"FY{y}" for y in years)), rows, caption="Table: Employees by region at fiscal year end")
    return Section("headcount", "Employees by region", (table,))


def _governance(report: Report) -> tuple[Section, ...]:
    people = report.people
    return (
        Section("leadership", "Leadership", (
            f"{people['ceo']} serves as Chief Executive Officer and {people['cfo']} as Chief Financial Officer.",
            f"The board of directors is chaired by {people['chair']}.")),
        Section("auditor", "External auditor", (
            f"The consolidated financial statements for fiscal {report.year} were audited by {report.auditor}.",)),
        Section("corporate", "Corporate information", (
            f"{report.company} was founded in {report.founded}.",
            f"The registered headquarters of the company are in {report.city}.")),
    )  # fmt: skip


def _note(report: Report, note: Restatement) -> Section:
    name = METRICS[note.metric]
    text = (f"The {name} of the {note.segment} segment for fiscal {note.year} was shown as {money(note.old)} "
            f"USD million in the segment table. Following a review of contract cut-off, this figure is restated "
            f"to {money(note.new)} USD million. No other figure is affected.")  # fmt: skip
    return Section(note.handle, f"Restatement of {note.segment} {name}", (text,))


def restated_needles(note: Restatement) -> tuple[str, ...]:
    """What a line of a restatement note says: the segment, the metric and the new figure."""
    return (f"The {METRICS[note.metric]} of the {note.segment} segment for fiscal {note.year}",
            f"restated to {money(note.new)} USD million")  # fmt: skip


def cell_needles(metric_row: str, value: int) -> tuple[str, ...]:
    """What a table row line holds: its label cell and a figure cell."""
    return (f"| {metric_row} |", f"| {money(value)} |")
