"""Questions about policy manuals, one maker per question type (`QUESTIONS`).

Every rule question names the employee's grade, so lookups and exceptions read alike.
- lookup: a rule no exception touches (a tier's hotel cap or meal allowance, the flight duration, the
  approval threshold, the claim deadline, the mileage rate).
- aggregation: a trip's accommodation and meals for a named city (tier list + two tables, exceptions
  included when the grade qualifies), the gap between two tiers' caps, or a mileage claim.
- exception: a rule an exception overrides for a qualifying grade (the rule and the exception are both
  evidence; by city, the tier list too).
- compliance: a described case (a flight booking, a hotel bill, an unapproved expense, a late claim) -
  yes or no; the evidence is the governing rule and, when it applies to the grade, its exception (an
  exception that does not apply to the case is not evidence).
- comparison (two editions): how much a figure changed from edition A to edition B.
- extraction: owner, effective date, currency and untouched figures as JSON.
- unanswerable: a Tier 4 city, a city in no tier, or a topic the manual does not cover.

Not here: the documents (`policy_manual.py`).
"""

from __future__ import annotations

import random
from fractions import Fraction

from posttrain.tasks.families.knowledge.corpus import Bundle, QuestionMaker
from posttrain.tasks.families.knowledge.names import money
from posttrain.tasks.families.knowledge.policy_manual import (
    RULE_HANDLES,
    TIER_CITIES,
    TIERS,
    Exemption,
    Manual,
    exemption_needles,
)
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

Rule = tuple[str, int | None]
"""A rule kind and its tier (None for rules without tiers)."""
RULES: tuple[Rule, ...] = (*(("hotel", t) for t in TIERS), *(("meals", t) for t in TIERS),
                           ("flight", None), ("approval", None), ("deadline", None))  # fmt: skip


def _rule_question(m: Manual, rule: str, tier: int | None, grade: int, where: str = "") -> str:
    place = where or f"a Tier {tier} city"
    return {
        "hotel": f"What is the maximum nightly hotel rate a grade E{grade} employee may claim in {place}, in {m.currency}?",
        "meals": f"What daily meal allowance does a grade E{grade} employee receive in {place}, in {m.currency}?",
        "flight": f"From what scheduled flight duration, in hours, may a grade E{grade} employee book business class?",
        "approval": f"Above what amount does a single expense of a grade E{grade} employee need prior written "
                    f"approval, in {m.currency}?",
        "deadline": f"Within how many days of the end of a trip must a grade E{grade} employee submit an expense claim?",
    }[rule]  # fmt: skip


def _rule_fact(b: Bundle, rule: str, tier: int | None = None, doc: int = 0) -> Fact:
    m: Manual = b.data[doc]
    value, home = m.base(rule, tier), (b.key(RULE_HANDLES[rule], doc),)
    needles = {
        "hotel": (f"| Tier {tier} |", f"| {money(value)} |"),
        "meals": (f"| Tier {tier} |", f"| {value} |"),
        "flight": ("Business class may be booked only", f"scheduled duration of {value} hours or more"),
        "approval": (f"above {money(value)} {m.currency} requires prior written approval",),
        "deadline": ("Expense claims must be submitted", f"within {value} days of the end of the trip"),
    }[rule]
    return Fact(f"{rule} rule{f' for Tier {tier}' if tier else ''}: {value}", needles, home)


def _mileage_fact(b: Bundle, doc: int = 0) -> Fact:
    m: Manual = b.data[doc]
    return Fact(f"mileage rate {m.mileage}", (f"{m.mileage} {m.currency} per kilometre",), (b.key("ground", doc),))


def _exemption_fact(b: Bundle, e: Exemption) -> Fact:
    return Fact(f"grade E{e.grade}+ exception to the {e.rule} rule: {e.value}", exemption_needles(b.data[0], e),
                (b.key(e.handle),))  # fmt: skip


def _tier_fact(b: Bundle, city: str) -> Fact:
    tier = b.data[0].tier_of(city)
    return Fact(f"{city} is a Tier {tier} city", (f"Tier {tier} cities:", city), (b.key("tiers"),))


def _governing(b: Bundle, rule: str, tier: int | None, grade: int) -> tuple[int, tuple[Fact, ...]]:
    """The figure that applies to `grade` and the facts it rests on (rule, plus the exception if it applies)."""
    value, exemption = b.data[0].effective_value(rule, tier, grade)
    facts = (_rule_fact(b, rule, tier),)
    return value, facts + ((_exemption_fact(b, exemption),) if exemption else ())


def _untouched(m: Manual) -> list[Rule]:
    return [r for r in RULES if m.exemption(*r) is None]


def lookup(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    options: list[Rule | None] = [*_untouched(m), None]
    choice = rng.choice(options)
    if choice is None:
        text = f"At what rate per kilometre is the business use of a private car reimbursed, in {m.currency}?"
        return ask(text, Scalar("numeric", m.mileage, (_mileage_fact(b),)), b.lines)
    rule, tier = choice
    value = m.base(rule, tier)
    text = _rule_question(m, rule, tier, rng.randint(1, 8))
    return ask(text, Scalar("numeric", value, (_rule_fact(b, rule, tier),), shown=money(value)), b.lines)


def exception(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    e = rng.choice(m.exemptions)
    grade = rng.randint(e.grade, 8)
    facts: tuple[Fact, ...] = (_rule_fact(b, e.rule, e.tier), _exemption_fact(b, e))
    where = ""
    if e.tier is not None and rng.random() < 0.5:
        where = rng.choice(m.tiers[e.tier])
        facts += (_tier_fact(b, where),)
    text = _rule_question(m, e.rule, e.tier, grade, where)
    return ask(text, Scalar("numeric", e.value, facts, shown=money(e.value)), b.lines)


def aggregation(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    grade = rng.randint(1, 8)

    def trip() -> Question:
        city = rng.choice([c for cities in m.tiers.values() for c in cities])
        tier, nights = m.tier_of(city), rng.randint(2, 6)
        hotel, hotel_facts = _governing(b, "hotel", tier, grade)
        meals, meal_facts = _governing(b, "meals", tier, grade)
        text = (f"A grade E{grade} employee spends {nights} nights in {city}. What is the most that can be "
                f"reimbursed for accommodation and meals together, counting one daily meal allowance per night, "
                f"in {m.currency}?")  # fmt: skip
        value = nights * (hotel + meals)
        return ask(text, Scalar("numeric", value, (_tier_fact(b, city), *hotel_facts, *meal_facts), shown=money(value)), b.lines)

    def gap() -> Question:
        high, low = sorted(rng.sample(TIERS, 2))
        top, top_facts = _governing(b, "hotel", high, grade)
        bottom, bottom_facts = _governing(b, "hotel", low, grade)
        text = (f"For a grade E{grade} employee, how much higher is the nightly hotel cap in Tier {high} cities "
                f"than in Tier {low} cities, in {m.currency}? Give a lower cap as a negative number.")  # fmt: skip
        return ask(text, Scalar("numeric", top - bottom, (*top_facts, *bottom_facts)), b.lines)

    def mileage() -> Question:
        km = rng.randrange(40, 900, 10)
        value = Fraction(m.mileage) * km
        text = f"A grade E{grade} employee drives {km} km in a private car on business. How much is reimbursed, in {m.currency}?"
        return ask(text, Scalar("numeric", f"{float(value):.2f}", (_mileage_fact(b),), abs_tol=0.006), b.lines)

    return one_of(rng, trip, trip, gap, mileage)


def compliance(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    grade = rng.randint(1, 8)
    rule = rng.choice(("flight", "hotel", "approval", "deadline"))
    facts: tuple[Fact, ...] = ()
    tier, city = None, ""
    if rule == "hotel":
        city = rng.choice([c for cities in m.tiers.values() for c in cities])
        tier, facts = m.tier_of(city), (_tier_fact(b, city),)
    limit, governing = _governing(b, rule, tier, grade)
    step = {"flight": 1, "hotel": 10, "approval": 50, "deadline": 3}[rule]
    amount = max(1, limit + step * rng.choice((-3, -2, -1, 1, 2, 3)))
    ok = amount >= limit if rule == "flight" else amount <= limit
    case = {
        "flight": f"a grade E{grade} employee books business class for a flight with a scheduled duration of {amount} hours",
        "hotel": f"a grade E{grade} employee claims {money(amount)} {m.currency} for one night in a hotel in {city}",
        "approval": f"a grade E{grade} employee pays a single expense of {money(amount)} {m.currency} without prior approval",
        "deadline": f"a grade E{grade} employee submits an expense claim {amount} days after the end of the trip",
    }[rule]  # fmt: skip
    text = f"Case: {case}. Does this comply with the manual?"
    return ask(text, Scalar("yes_no", "yes" if ok else "no", (*facts, *governing)), b.lines)


def comparison(b: Bundle, rng: random.Random) -> Question:
    first: Manual = b.data[0]
    second: Manual = b.data[1]
    editions = f"the {first.edition} edition (Document A)", f"the {second.edition} edition (Document B)"
    untouched = [*_untouched(first), None]
    changed = [r for r in untouched if (first.mileage != second.mileage if r is None else first.base(*r) != second.base(*r))]
    choice = rng.choice(changed if changed and rng.random() < 0.75 else untouched)
    if choice is None:
        value = str(Fraction(second.mileage) - Fraction(first.mileage))
        what, unit, facts = "mileage rate for private cars", first.currency, (_mileage_fact(b, 0), _mileage_fact(b, 1))
        spec = Scalar("numeric", f"{float(Fraction(value)):.2f}", facts, abs_tol=0.001)
    else:
        rule, tier = choice
        what = {"hotel": f"nightly hotel cap for Tier {tier} cities", "meals": f"daily meal allowance in Tier {tier} cities",
                "flight": "flight duration from which business class may be booked",
                "approval": "amount above which a single expense needs prior approval",
                "deadline": "deadline for submitting expense claims"}[rule]  # fmt: skip
        unit = {"flight": "hours", "deadline": "days"}.get(rule, first.currency)
        facts = (_rule_fact(b, rule, tier, 0), _rule_fact(b, rule, tier, 1))
        spec = Scalar("numeric", second.base(rule, tier) - first.base(rule, tier), facts)
    text = (f"By how much did the {what} change from {editions[0]} to {editions[1]}, in {unit}? "
            "Give a decrease as a negative number and no change as 0.")  # fmt: skip
    return ask(text, spec, b.lines)


def extraction(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    scope = b.key("scope")
    day, month = m.effective.split(" ")
    fields = {
        "policy_owner": FieldSpec("normalized", m.owner, (Fact("owner", (f"owned by {m.owner}",), (scope,)),)),
        "effective_date": FieldSpec("normalized", f"{m.effective} {m.edition}",
                                    (Fact("effective date", (f"takes effect on {m.effective} {m.edition}",), (scope,)),),
                                    aliases=(f"{month} {day}, {m.edition}", f"{day} {month[:3]} {m.edition}")),
        "mileage_rate": FieldSpec("numeric", m.mileage, (_mileage_fact(b),)),
    }  # fmt: skip
    if m.exemption("deadline") is None:
        fields["claim_deadline_days"] = FieldSpec("numeric", m.deadline_days, (_rule_fact(b, "deadline"),))
    if m.exemption("approval") is None:
        fields["approval_threshold"] = FieldSpec("numeric", m.approval, (_rule_fact(b, "approval"),))
    chosen = choose_fields(fields, rng)
    text = f"Extract these facts from the {m.organisation} manual: {', '.join(chosen)}."
    return ask_fields(text, {name: fields[name] for name in chosen}, b.lines)


_UNCOVERED = (
    "What monthly allowance is paid for home internet, in {cur}?",
    "How many weeks of paid parental leave does the manual grant?",
    "Up to what amount per year is a gym membership reimbursed, in {cur}?",
    "What relocation allowance is paid when an employee moves to another city, in {cur}?",
    "What is the monthly limit for mobile phone costs, in {cur}?",
    "Up to what amount per year are tuition fees reimbursed, in {cur}?",
)


def unanswerable(b: Bundle, rng: random.Random) -> Question:
    m: Manual = b.data[0]
    grade = rng.randint(1, 8)
    listed = {c for cities in m.tiers.values() for c in cities}
    texts = (
        _rule_question(m, rng.choice(("hotel", "meals")), 4, grade),
        _rule_question(m, rng.choice(("hotel", "meals")), None, grade, rng.choice([c for c in TIER_CITIES if c not in listed])),
        rng.choice(_UNCOVERED).format(cur=m.currency),
    )
    return ask(rng.choice(texts), Scalar("not_stated", None, asked_as="numeric"), b.lines)


QUESTIONS: dict[str, QuestionMaker] = {
    "lookup": lookup, "aggregation": aggregation, "exception": exception, "compliance": compliance,
    "comparison": comparison, "extraction": extraction, "unanswerable": unanswerable,
}  # fmt: skip
