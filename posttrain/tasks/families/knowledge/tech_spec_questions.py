"""Questions about datasheets, one maker per question type (`QUESTIONS`).

Every figure question names a silicon revision, so lookups and exceptions read alike.
- lookup: a figure or a register's reset value for a revision no erratum touches.
- aggregation: typical active power (two table rows), the time to clock bytes over SPI, the width of the
  operating temperature range, or how many registers are read-only.
- exception: a figure or reset value an erratum changes, for the revision it names (the table or
  sentence and the erratum are both evidence).
- compliance: an operating point (supply voltage and temperature) or an SPI clock - within the
  specification for the named revision, yes or no (an erratum for another revision is not evidence).
- comparison (two versions): how much a figure changed, or which register's reset value changed.
- extraction: manufacturer, part number, package and figures no erratum touches, as JSON.
- unanswerable: an interface the device lacks, a figure the datasheet never gives, an absent register.

Not here: the documents (`tech_spec.py`).
"""

from __future__ import annotations

import random
from fractions import Fraction

from posttrain.tasks.families.knowledge.corpus import Bundle, QuestionMaker
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
from posttrain.tasks.families.knowledge.tech_spec import (
    REGISTERS,
    REVISIONS,
    Erratum,
    Spec,
    erratum_phrase,
)


def _fact(b: Bundle, key: str, doc: int = 0) -> Fact:
    q = b.data[doc].quantities[key]
    return Fact(f"{q.phrase}: {q.value} {q.unit}", q.needles(), (b.key(q.handle, doc),))


def _register_fact(b: Bundle, name: str, doc: int = 0) -> Fact:
    reg = b.data[doc].register(name)
    return Fact(f"{name} resets to {reg.reset}", (f"| {name} |", f"| {reg.reset} |"), (b.key("registers", doc),))


def _erratum_fact(b: Bundle, e: Erratum) -> Fact:
    return Fact(f"revision {e.revision}: {erratum_phrase(b.data[0], e)}",
                (f"Silicon revision {e.revision}:", erratum_phrase(b.data[0], e)), (b.key(e.handle),))  # fmt: skip


def _clean_revision(spec: Spec, rng: random.Random, *targets: str) -> str | None:
    """A revision no erratum of `targets` applies to (None when every revision has one)."""
    clean = [r for r in REVISIONS if all(spec.erratum(t, r) is None for t in targets)]
    return rng.choice(clean) if clean else None


def _governing(b: Bundle, key: str, revision: str) -> tuple[str, tuple[Fact, ...]]:
    """The figure for `revision` and its evidence (the erratum too when it applies)."""
    spec: Spec = b.data[0]
    e = spec.erratum(key, revision)
    if e is None:
        return spec.quantities[key].value, (_fact(b, key),)
    return e.value, (_fact(b, key), _erratum_fact(b, e))


def _ask_quantity(spec: Spec, key: str, revision: str) -> str:
    q = spec.quantities[key]
    return f"What is the {q.phrase} of a silicon revision {revision} {spec.part_number}, in {q.unit}?"


def _ask_reset(spec: Spec, name: str, revision: str) -> str:
    return f"What is the reset value of register {name} on a silicon revision {revision} {spec.part_number}?"


def lookup(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]

    def figure() -> Question | None:
        key = rng.choice(list(spec.quantities))
        revision = _clean_revision(spec, rng, key)
        if revision is None:
            return None
        return ask(_ask_quantity(spec, key, revision), Scalar("numeric", spec.quantities[key].value, (_fact(b, key),)), b.lines)

    def reset() -> Question | None:
        reg = rng.choice(spec.registers)
        revision = _clean_revision(spec, rng, f"reg:{reg.name}")
        if revision is None:
            return None
        return ask(_ask_reset(spec, reg.name, revision), Scalar("normalized", reg.reset, (_register_fact(b, reg.name),)), b.lines)

    return one_of(rng, figure, figure, figure, reset)


def aggregation(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]
    q = spec.quantities

    def power() -> Question | None:
        revision = _clean_revision(spec, rng, "vdd_typ", "idd_typ")
        if revision is None:
            return None
        value = round(float(Fraction(q["vdd_typ"].value) * Fraction(q["idd_typ"].value)), 1)
        text = (f"What is the typical active power consumption (typical supply voltage times typical active supply "
                f"current) of a silicon revision {revision} {spec.part_number}, in mW rounded to one decimal?")  # fmt: skip
        return ask(text, Scalar("numeric", value, (_fact(b, "vdd_typ"), _fact(b, "idd_typ")), abs_tol=0.051), b.lines)

    def transfer() -> Question | None:
        revision = rng.choice(REVISIONS)
        clock, facts = _governing(b, "spi", revision)
        num_bytes = rng.choice((64, 128, 256, 512, 1024, 4096))
        value = round(float(Fraction(num_bytes * 8) / Fraction(clock)), 2)
        text = (f"How long does it take to clock {num_bytes} bytes over SPI at the maximum SPI clock frequency of a "
                f"silicon revision {revision} {spec.part_number}, in microseconds rounded to two decimals?")  # fmt: skip
        return ask(text, Scalar("numeric", value, facts, abs_tol=0.006), b.lines)

    def span() -> Question | None:
        revision = rng.choice(REVISIONS)
        top, top_facts = _governing(b, "temp_max", revision)
        value = int(top) - int(q["temp_min"].value)
        text = (f"How wide is the operating ambient temperature range of a silicon revision {revision} "
                f"{spec.part_number} (maximum minus minimum), in °C?")  # fmt: skip
        return ask(text, Scalar("numeric", value, (_fact(b, "temp_min"), *top_facts)), b.lines)

    def read_only() -> Question | None:
        names = [r.name for r in spec.registers if r.access == "RO"]
        if not names:
            return None
        text = "How many registers in the register map have the access type RO (read-only)?"
        return ask(text, Scalar("numeric", len(names), tuple(_register_fact(b, n) for n in names)), b.lines)

    return one_of(rng, power, transfer, span, read_only)


def exception(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]
    e = rng.choice(spec.errata)
    if e.target.startswith("reg:"):
        name = e.target[4:]
        facts = (_register_fact(b, name), _erratum_fact(b, e))
        return ask(_ask_reset(spec, name, e.revision), Scalar("normalized", e.value, facts), b.lines)
    facts = (_fact(b, e.target), _erratum_fact(b, e))
    return ask(_ask_quantity(spec, e.target, e.revision), Scalar("numeric", e.value, facts), b.lines)


def compliance(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]
    q = spec.quantities
    revision = rng.choice(REVISIONS)

    def operating_point() -> Question:
        top_v, vmax_facts = _governing(b, "vdd_max", revision)
        top_t, tmax_facts = _governing(b, "temp_max", revision)
        low_v, low_t = Fraction(q["vdd_min"].value), int(q["temp_min"].value)
        volts, temp = Fraction(q["vdd_typ"].value), rng.randint(low_t, int(top_t))
        broken = rng.choice(("none", "none", "voltage", "temperature"))
        if broken == "voltage":
            volts = rng.choice((low_v - Fraction(rng.choice((5, 10, 20)), 100), Fraction(top_v) + Fraction(rng.choice((5, 10, 20)), 100)))
        elif broken == "temperature":
            temp = rng.choice((low_t - rng.choice((5, 10)), int(top_t) + rng.choice((5, 10))))
        ok = low_v <= volts <= Fraction(top_v) and low_t <= temp <= int(top_t)
        text = (f"Case: a design runs a silicon revision {revision} {spec.part_number} from a {float(volts):.2f} V "
                f"supply at an ambient temperature of {temp} °C. Is this within the recommended operating conditions?")  # fmt: skip
        facts = (_fact(b, "vdd_min"), *vmax_facts, _fact(b, "temp_min"), *tmax_facts)
        return ask(text, Scalar("yes_no", "yes" if ok else "no", facts), b.lines)

    def spi_clock() -> Question:
        limit, facts = _governing(b, "spi", revision)
        clock = max(1, int(float(limit)) + rng.choice((-4, -2, -1, 1, 2, 4)))
        text = (f"Case: a host clocks the SPI interface of a silicon revision {revision} {spec.part_number} at "
                f"{clock} MHz. Is this within the specification?")  # fmt: skip
        return ask(text, Scalar("yes_no", "yes" if clock <= float(limit) else "no", facts), b.lines)

    return one_of(rng, operating_point, spi_clock)


def comparison(b: Bundle, rng: random.Random) -> Question:
    first: Spec = b.data[0]
    second: Spec = b.data[1]
    versions = f"version {first.version} (Document A)", f"version {second.version} (Document B)"

    def figure() -> Question:
        changed = [k for k, q in first.quantities.items() if second.quantities[k].value != q.value]
        key = rng.choice(changed if changed and rng.random() < 0.75 else list(first.quantities))
        q = first.quantities[key]
        value = Fraction(second.quantities[key].value) - Fraction(q.value)
        decimals = len(q.value.partition(".")[2])
        text = (f"By how much did the {q.phrase} change from {versions[0]} to {versions[1]} of the "
                f"{first.part_number} datasheet, in {q.unit}? Give a decrease as a negative number and no change as 0.")  # fmt: skip
        spec = Scalar("numeric", f"{float(value):.{decimals}f}", (_fact(b, key, 0), _fact(b, key, 1)), abs_tol=0.001)
        return ask(text, spec, b.lines)

    def register() -> Question:
        moved = next(r for r, s in zip(first.registers, second.registers, strict=True) if r.reset != s.reset)
        text = (f"Which register has a different reset value in {versions[1]} than in {versions[0]} of the "
                f"{first.part_number} datasheet?")  # fmt: skip
        facts = (_register_fact(b, moved.name, 0), _register_fact(b, moved.name, 1))
        return ask(text, Scalar("normalized", moved.name, facts), b.lines)

    return one_of(rng, figure, figure, register)


_FIELD_NAMES = {"vdd_typ": "typical_supply_voltage_V", "temp_max": "max_operating_temperature_C",
                "spi": "max_spi_clock_MHz", "i2c": "max_i2c_clock_kHz", "startup": "startup_time_ms"}  # fmt: skip


def extraction(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]
    ordering = b.key("ordering")
    fields = {
        "manufacturer": FieldSpec("normalized", spec.maker, (Fact("maker", (f"manufactured by {spec.maker}",), (ordering,)),)),
        "part_number": FieldSpec("exact", spec.part_number,
                                 (Fact("part number", (f"ordered as part number {spec.part_number}",), (ordering,)),)),
        "package": FieldSpec("normalized", spec.package, (Fact("package", (f"in a {spec.package} package",), (ordering,)),)),
    }  # fmt: skip
    for key, name in _FIELD_NAMES.items():
        if not any(e.target == key for e in spec.errata):
            fields[name] = FieldSpec("numeric", spec.quantities[key].value, (_fact(b, key),))
    chosen = choose_fields(fields, rng)
    text = f"Extract these facts from the {spec.part_number} datasheet: {', '.join(chosen)}."
    return ask_fields(text, {name: fields[name] for name in chosen}, b.lines)


_MISSING = (
    "What is the maximum CAN bus bit rate of the {part}, in kbit/s?",
    "What is the maximum USB data rate of the {part}, in Mbit/s?",
    "What is the mean time between failures of the {part}, in hours?",
    "What is the supply current of the {part} in deep power-down mode, in nA?",
    "How many write cycles does the on-chip flash memory of the {part} endure?",
    "What is the maximum Ethernet link speed of the {part}, in Mbit/s?",
)


def unanswerable(b: Bundle, rng: random.Random) -> Question:
    spec: Spec = b.data[0]
    absent = [name for name in REGISTERS if all(r.name != name for r in spec.registers)]
    texts = [rng.choice(_MISSING).format(part=spec.part_number)]
    if absent:
        texts.append(_ask_reset(spec, rng.choice(absent), rng.choice(REVISIONS)))
    if len(texts) == 1 or rng.random() < 0.5:
        return ask(texts[0], Scalar("not_stated", None, asked_as="numeric"), b.lines)
    return ask(texts[1], Scalar("not_stated", None, asked_as="normalized"), b.lines)


QUESTIONS: dict[str, QuestionMaker] = {
    "lookup": lookup, "aggregation": aggregation, "exception": exception, "compliance": compliance,
    "comparison": comparison, "extraction": extraction, "unanswerable": unanswerable,
}  # fmt: skip
