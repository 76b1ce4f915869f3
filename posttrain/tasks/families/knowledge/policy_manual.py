"""Corpus `policy_manual`: an organisation's travel and expense manual - rules with figures, exceptions
that override them for senior grades, and cross-references between them.

Rules: nightly hotel caps and daily meal allowances per city tier (two tables, hotel caps 90 and above,
meal allowances below 90, so no figure fits the wrong table), the flight duration from which business
class is allowed, the approval threshold for single expenses, the claim deadline and the mileage rate.
City tiers list their cities in the definitions chapter. Exceptions (2 to 4 per manual, in their own
chapter) each say "Notwithstanding §x, employees at grade E<g> or above ..." and give a different figure
for one rule. Pairs (comparison) are two editions of one manual: the later one changes some figures.

Question makers live in `policy_manual_questions.py`. Guarantees: deterministic in the RNG; an exception
never repeats its rule's figure; at most one exception per rule (and tier). Not here: question wording.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from posttrain.tasks.families.knowledge.corpus import Draft
from posttrain.tasks.families.knowledge.document import Document, Section, Table, estimate_tokens, render
from posttrain.tasks.families.knowledge.names import money, organisation, person
from posttrain.tasks.families.knowledge.policy_manual_prose import VOCABULARY
from posttrain.tasks.families.knowledge.prose import FillerWriter, spread

TIER_CITIES = ("London", "Paris", "Tokyo", "New York", "Singapore", "Zurich", "Sydney", "Madrid", "Toronto",
               "Vienna", "Prague", "Lisbon", "Warsaw", "Athens", "Dublin", "Oslo", "Seoul", "Nairobi",
               "Cape Town", "Mumbai", "Santiago", "Hanoi")  # fmt: skip
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
TIERS = (1, 2, 3)
RULE_HANDLES = {"hotel": "hotel", "meals": "meals", "flight": "air", "approval": "approvals", "deadline": "claims"}
"""Rule kind -> the drafting id of the section stating it."""


@dataclass(frozen=True)
class Exemption:
    """An exception: for grade `grade` and above, rule `rule` (in tier `tier`, for per-tier rules) is `value`."""

    rule: str
    tier: int | None
    grade: int
    value: int
    handle: str


@dataclass(frozen=True)
class Manual:
    """The data one manual is written from."""

    organisation: str
    edition: int
    owner: str
    effective: str
    currency: str
    tiers: dict[int, tuple[str, ...]]
    hotel: dict[int, int]
    meals: dict[int, int]
    flight_hours: int
    approval: int
    deadline_days: int
    mileage: str
    exemptions: tuple[Exemption, ...]

    def base(self, rule: str, tier: int | None = None) -> int:
        """A rule's figure before exceptions."""
        scalars = {"flight": self.flight_hours, "approval": self.approval, "deadline": self.deadline_days}
        return self.hotel[tier or 1] if rule == "hotel" else self.meals[tier or 1] if rule == "meals" else scalars[rule]

    def exemption(self, rule: str, tier: int | None = None) -> Exemption | None:
        return next((e for e in self.exemptions if e.rule == rule and e.tier in (tier, None)), None)

    def effective_value(self, rule: str, tier: int | None, grade: int) -> tuple[int, Exemption | None]:
        """A rule's figure for an employee of `grade`, and the exception that set it (if one applies)."""
        exemption = self.exemption(rule, tier)
        if exemption is not None and grade >= exemption.grade:
            return exemption.value, exemption
        return self.base(rule, tier), None

    def tier_of(self, city: str) -> int:
        return next(t for t, cities in self.tiers.items() if city in cities)


def make_manual(rng: random.Random, num_tokens: int) -> Manual:
    """Random figures, tiers and exceptions for one manual."""
    cities = rng.sample(TIER_CITIES, 12)
    hotel_floor = sorted(rng.sample(range(90, 330, 5), 3), reverse=True)
    meals_floor = sorted(rng.sample(range(30, 86), 3), reverse=True)
    manual = Manual(
        organisation=organisation(rng), edition=rng.randint(2018, 2025), owner=person(rng, set()),
        effective=f"{rng.randint(1, 28)} {rng.choice(MONTHS)}", currency=rng.choice(("EUR", "USD", "GBP", "CHF")),
        tiers={1: tuple(cities[:4]), 2: tuple(cities[4:8]), 3: tuple(cities[8:])},
        hotel=dict(zip(TIERS, hotel_floor, strict=True)), meals=dict(zip(TIERS, meals_floor, strict=True)),
        flight_hours=rng.randint(5, 9), approval=rng.randrange(300, 2_000, 50), deadline_days=rng.choice((14, 21, 30, 45)),
        mileage=f"0.{rng.randint(25, 45)}", exemptions=())  # fmt: skip
    count = 2 if num_tokens < 3_000 else 3 if num_tokens < 12_000 else 4
    picked = rng.sample([("hotel", t) for t in TIERS] + [("meals", t) for t in TIERS] +
                        [("flight", None), ("approval", None), ("deadline", None)], count)  # fmt: skip
    return replace(manual, exemptions=tuple(_exemption(rng, manual, rule, tier, n) for n, (rule, tier) in enumerate(picked)))


def _exemption(rng: random.Random, manual: Manual, rule: str, tier: int | None, number: int) -> Exemption:
    base = manual.base(rule, tier)
    options = {
        "hotel": [v for v in range(base + 20, base + 120, 5) if v >= 90],
        "meals": [v for v in range(base + 5, 90) if v != base] or [base - 5],
        "flight": list(range(2, base)),
        "approval": list(range(base + 250, base + 2_000, 250)),
        "deadline": [d for d in (30, 45, 60, 90) if d > base],
    }[rule]
    return Exemption(rule, tier, rng.randint(4, 7), rng.choice(options), f"exempt{number}")


def draft(rng: random.Random, num_tokens: int) -> Draft:
    """One manual of about `num_tokens` tokens."""
    manual = make_manual(rng, num_tokens)
    return write(rng, manual, num_tokens), manual


def draft_pair(rng: random.Random, num_tokens: int) -> tuple[Draft, Draft]:
    """Two editions of one manual; the later one changes two to four figures."""
    first = make_manual(rng, num_tokens)
    changes: dict[str, Any] = {
        "hotel": {t: max(90, v + rng.choice((-10, 5, 10, 15, 20))) for t, v in first.hotel.items()},
        "meals": {t: min(89, v + rng.choice((-3, 2, 4, 5))) for t, v in first.meals.items()},
        "deadline_days": rng.choice([d for d in (14, 21, 30, 45, 60) if d != first.deadline_days]),
        "approval": first.approval + rng.choice((-100, 100, 250)),
        "mileage": f"0.{int(first.mileage[2:]) + rng.choice((-2, 1, 2, 3))}",
    }
    chosen = rng.sample(sorted(changes), rng.randint(2, 4))
    second = replace(first, edition=first.edition + 1, owner=rng.choice((first.owner, person(rng, {first.owner}))),
                     **{name: changes[name] for name in chosen})  # fmt: skip
    return (write(rng, first, num_tokens), first), (write(rng, second, num_tokens), second)


def write(rng: random.Random, manual: Manual, num_tokens: int) -> Document:
    """The manual as a drafted document: rule chapters, exceptions, filler chapters between them."""
    writer = FillerWriter(VOCABULARY, rng, subject=rng.choice(("the organisation", manual.organisation)),
                          forbidden=(manual.owner,))  # fmt: skip
    core = _core_chapters(manual, writer)
    title = f"{manual.organisation} - Travel and Expense Manual, {manual.edition} edition"
    preamble = f"All amounts are in {manual.currency}."
    core_tokens = estimate_tokens(render([Document(title, tuple(core), preamble)]))
    filler = writer.sections_of_size("f", num_tokens - core_tokens)
    dealt = spread(rng, filler, len(core) + 2)
    chapters = [Section(c.id, c.title, c.blocks, (*c.children, *extra)) for c, extra in zip(core, dealt, strict=False)]
    closing = zip(("Conduct and compliance", "Other provisions"), dealt[len(core) :], strict=True)
    chapters += [Section(f"more{i}", name, (), tuple(extra)) for i, (name, extra) in enumerate(closing) if extra]
    return Document(title, tuple(chapters), preamble)


def _core_chapters(manual: Manual, writer: FillerWriter) -> list[Section]:
    cur = manual.currency
    tiers = tuple(f"Tier {t} cities: {', '.join(manual.tiers[t])}." for t in TIERS)
    rules = [
        Section("air", "Air travel", (
            f"Economy class is the standard for all flights. Business class may be booked only for flights with a "
            f"scheduled duration of {manual.flight_hours} hours or more.",)),
        Section("hotel", "Accommodation", (
            "Accommodation is reimbursed up to the nightly cap of the city's tier (see [[tiers]]).",
            Table(("City tier", f"Nightly cap ({cur})"), tuple((f"Tier {t}", money(manual.hotel[t])) for t in TIERS)))),
        Section("ground", "Ground transport", (
            f"Use of a private car for business journeys is reimbursed at {manual.mileage} {cur} per kilometre.",)),
    ]
    expenses = [
        Section("meals", "Meals", (
            "A daily meal allowance is paid per travel day according to the city's tier (see [[tiers]]).",
            Table(("City tier", f"Daily meal allowance ({cur})"), tuple((f"Tier {t}", str(manual.meals[t])) for t in TIERS)))),
        Section("approvals", "Approvals", (
            f"Any single expense above {money(manual.approval)} {cur} requires prior written approval from a director.",)),
        Section("claims", "Expense claims", (
            f"Expense claims must be submitted within {manual.deadline_days} days of the end of the trip.",)),
    ]  # fmt: skip
    return [
        Section("scope", "Purpose and scope", (
            f"This manual is owned by {manual.owner}, Head of Finance Operations, and takes effect on "
            f"{manual.effective} {manual.edition}.", writer.paragraph(writer.vocabulary.topics[0]))),
        Section("definitions", "Definitions", ("Grades run from E1 (entry level) to E8 (executive).",), (
            Section("tiers", "City tiers", tiers),)),
        Section("travel", "Travel", (), tuple(rules)),
        Section("expenses", "Expenses", (), tuple(expenses)),
        Section("exceptions", "Exceptions", ("The exceptions below take precedence over the general rules.",),
                tuple(_exemption_section(manual, e) for e in manual.exemptions)),
    ]  # fmt: skip


def exemption_text(manual: Manual, e: Exemption) -> str:
    """The sentence of an exception (its `[[handle]]` becomes the overridden rule's cite key)."""
    cur, ref = manual.currency, f"[[{RULE_HANDLES[e.rule]}]]"
    body = {
        "hotel": f"may claim up to {money(e.value)} {cur} per night in Tier {e.tier} cities",
        "meals": f"receive a daily meal allowance of {e.value} {cur} in Tier {e.tier} cities",
        "flight": f"may book business class for flights with a scheduled duration of {e.value} hours or more",
        "approval": f"need prior written approval only for single expenses above {money(e.value)} {cur}",
        "deadline": f"may submit expense claims within {e.value} days of the end of the trip",
    }[e.rule]
    return f"Notwithstanding {ref}, employees at grade E{e.grade} or above {body}."


def exemption_needles(manual: Manual, e: Exemption) -> tuple[str, ...]:
    text = exemption_text(manual, e)
    return (f"grade E{e.grade} or above", text[text.index(" or above ") + len(" or above ") :].rstrip("."))


def _exemption_section(manual: Manual, e: Exemption) -> Section:
    subject = {"hotel": "Accommodation", "meals": "Meal allowance", "flight": "Business class",
               "approval": "Approval threshold", "deadline": "Claim deadline"}[e.rule]  # fmt: skip
    return Section(e.handle, f"{subject} for senior grades", (exemption_text(manual, e),))
