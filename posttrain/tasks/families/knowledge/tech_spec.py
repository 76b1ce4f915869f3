"""Corpus `tech_spec`: datasheets of an invented sensor controller - characteristics tables with units,
interface limits, timing, a register map, and errata that change figures for one silicon revision.

Every figure is a `Quantity` (phrase, value, unit, the section stating it and the needles that find it):
electrical characteristics (a table: supply voltage, currents, oscillator, drive), interface clocks (a
table), start-up and wake-up times and the operating temperature range (sentences). Registers have an
address, a reset value and an access type. Errata (1 to 3 per datasheet, in their own chapter) each say
"Silicon revision <R>: the <phrase> is <value> instead of the value given in §x" for one quantity or
one register's reset value. Pairs (comparison) are two versions of one datasheet: the later one changes
two or three quantities and exactly one register's reset value.

Question makers live in `tech_spec_questions.py`. Guarantees: deterministic in the RNG; an erratum never
repeats the figure it replaces; table rows are found by their label cell. Not here: question wording.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from posttrain.tasks.families.knowledge.corpus import Draft
from posttrain.tasks.families.knowledge.document import Document, Section, Table, estimate_tokens, render
from posttrain.tasks.families.knowledge.names import organisation
from posttrain.tasks.families.knowledge.prose import FillerWriter, spread
from posttrain.tasks.families.knowledge.tech_spec_prose import VOCABULARY

REVISIONS = ("A", "B", "C", "D")
REGISTERS = {"CTRL1": "Main control", "CTRL2": "Secondary control", "STATUS": "Device status",
             "CONFIG": "Measurement configuration", "INT_EN": "Interrupt enable", "INT_FLAG": "Interrupt flags",
             "DATA_OUT": "Result data", "FIFO_CFG": "Buffer configuration", "CLK_DIV": "Clock divider",
             "PWR_MODE": "Power mode", "GPIO_DIR": "Pin direction", "GPIO_OUT": "Pin output level",
             "ADC_CFG": "Converter configuration", "TIMER_CTL": "Timer control", "WDT_CFG": "Watchdog configuration",
             "SELF_TEST": "Self-test control"}  # fmt: skip
PACKAGES = ("QFN-32", "TSSOP-20", "LQFP-48", "WLCSP-25", "SOIC-16", "DFN-10")
ERRATA_TARGETS = ("vdd_max", "idd_typ", "isleep_typ", "spi", "fosc_typ", "startup", "temp_max")


@dataclass(frozen=True)
class Quantity:
    """A figure of the datasheet and where it is stated."""

    phrase: str
    value: str
    unit: str
    handle: str
    label: str = ""
    """The table row label (empty for figures stated in a sentence)."""

    def needles(self) -> tuple[str, ...]:
        if self.label:
            return (f"| {self.label} |", f"| {self.value} |")
        return (f"{self.phrase} is {self.value} {self.unit}",)


@dataclass(frozen=True)
class Register:
    name: str
    address: str
    reset: str
    access: str


@dataclass(frozen=True)
class Erratum:
    """For silicon revision `revision`, quantity (or `reg:<name>` reset value) `target` is `value`."""

    target: str
    revision: str
    value: str
    handle: str


@dataclass(frozen=True)
class Spec:
    """The data one datasheet is written from."""

    maker: str
    part_number: str
    package: str
    version: str
    quantities: dict[str, Quantity]
    registers: tuple[Register, ...]
    errata: tuple[Erratum, ...]

    def erratum(self, target: str, revision: str) -> Erratum | None:
        return next((e for e in self.errata if e.target == target and e.revision == revision), None)

    def register(self, name: str) -> Register:
        return next(r for r in self.registers if r.name == name)


def _electrical(rng: random.Random) -> dict[str, Quantity]:
    nominal = rng.choice((1.8, 3.3, 5.0))
    idd, isleep, fosc = round(rng.uniform(0.8, 24.0), 1), round(rng.uniform(0.5, 9.5), 1), rng.choice((8, 12, 16, 24, 32, 48))
    rows = {  # key: (phrase, label, value, unit)
        "vdd_min": ("minimum supply voltage", "Supply voltage", f"{nominal * rng.choice((0.9, 0.92, 0.95)):.2f}", "V"),
        "vdd_typ": ("typical supply voltage", "Supply voltage", f"{nominal:.2f}", "V"),
        "vdd_max": ("maximum supply voltage", "Supply voltage", f"{nominal * rng.choice((1.05, 1.08, 1.1)):.2f}", "V"),
        "idd_typ": ("typical active supply current", "Supply current, active", f"{idd:.1f}", "mA"),
        "idd_max": ("maximum active supply current", "Supply current, active", f"{idd * rng.uniform(1.2, 1.6):.1f}", "mA"),
        "isleep_typ": ("typical sleep current", "Supply current, sleep", f"{isleep:.1f}", "uA"),
        "isleep_max": ("maximum sleep current", "Supply current, sleep", f"{isleep * rng.uniform(2, 4):.1f}", "uA"),
        "fosc_typ": ("typical internal oscillator frequency", "Internal oscillator frequency", f"{fosc}", "MHz"),
        "iout_max": ("maximum output drive current", "Output drive current", f"{rng.randint(4, 24)}", "mA"),
    }  # fmt: skip
    return {key: Quantity(phrase, value, unit, "electrical", label) for key, (phrase, label, value, unit) in rows.items()}


def make_spec(rng: random.Random, num_tokens: int) -> Spec:
    """Random figures, registers and errata for one datasheet."""
    quantities = _electrical(rng)
    quantities |= {
        "spi": Quantity("maximum SPI clock frequency", f"{rng.choice((8, 10, 12, 16, 20, 25, 40))}", "MHz", "interfaces", "SPI"),
        "i2c": Quantity("maximum I2C clock frequency", f"{rng.choice((100, 400, 1000))}", "kHz", "interfaces", "I2C"),
        "uart": Quantity("maximum UART baud rate", f"{rng.choice((115.2, 230.4, 460.8, 921.6))}", "kbaud", "interfaces", "UART"),
        "startup": Quantity("start-up time after power-on", f"{rng.randint(2, 50)}", "ms", "timing"),
        "wakeup": Quantity("wake-up time from sleep", f"{rng.randrange(5, 500, 5)}", "us", "timing"),
        "temp_min": Quantity("minimum operating ambient temperature", f"{rng.choice((-40, -20, 0))}", "°C", "environment"),
        "temp_max": Quantity("maximum operating ambient temperature", f"{rng.choice((70, 85, 105, 125))}", "°C", "environment"),
    }  # fmt: skip
    count = 6 if num_tokens < 3_000 else 10 if num_tokens < 12_000 else 14
    names = rng.sample(list(REGISTERS), count)
    registers = tuple(Register(name, f"0x{i:02X}", f"0x{rng.randrange(256):02X}", rng.choice(("RW", "RW", "RO", "W1C")))
                      for i, name in enumerate(names))  # fmt: skip
    prefix = "".join(rng.choice("KMRTVX") for _ in range(2))
    spec = Spec(organisation(rng), f"{prefix}-{rng.randint(1000, 9999)}{rng.choice('ABLPS')}", rng.choice(PACKAGES),
                f"1.{rng.randint(0, 4)}", quantities, registers, ())  # fmt: skip
    num_errata = 1 if num_tokens < 3_000 else 2 if num_tokens < 12_000 else 3
    targets = rng.sample([*ERRATA_TARGETS, *(f"reg:{r.name}" for r in registers[:3])], num_errata)
    errata = tuple(Erratum(t, rng.choice(REVISIONS), _changed(rng, spec, t), f"erratum{n}") for n, t in enumerate(targets))
    return replace(spec, errata=errata)


def _changed(rng: random.Random, spec: Spec, target: str) -> str:
    """A different value for a quantity (or register reset) in the same format."""
    if target.startswith("reg:"):
        old = spec.register(target[4:]).reset
        return next(v for v in (f"0x{rng.randrange(256):02X}" for _ in range(64)) if v != old)
    old = spec.quantities[target].value
    decimals = len(old.partition(".")[2])
    factor = rng.choice((0.8, 0.9, 0.95, 1.05, 1.1, 1.2))
    new = f"{float(old) * factor:.{decimals}f}"
    return new if new != old else f"{float(old) + 1:.{decimals}f}"


def draft(rng: random.Random, num_tokens: int) -> Draft:
    """One datasheet of about `num_tokens` tokens."""
    spec = make_spec(rng, num_tokens)
    return write(rng, spec, num_tokens), spec


def draft_pair(rng: random.Random, num_tokens: int) -> tuple[Draft, Draft]:
    """Two versions of one datasheet; the later one changes some figures and one register's reset value."""
    first = make_spec(rng, num_tokens)
    changed = rng.sample(["vdd_max", "idd_typ", "isleep_typ", "spi", "startup", "wakeup", "temp_max"], rng.randint(2, 3))
    quantities = dict(first.quantities)
    for key in changed:
        quantities[key] = replace(quantities[key], value=_changed(rng, first, key))
    moved = rng.choice(first.registers)
    registers = tuple(replace(r, reset=_changed(rng, first, f"reg:{r.name}")) if r is moved else r for r in first.registers)
    second = replace(first, version="2.0", quantities=quantities, registers=registers)
    return (write(rng, first, num_tokens), first), (write(rng, second, num_tokens), second)


def write(rng: random.Random, spec: Spec, num_tokens: int) -> Document:
    """The datasheet as a drafted document: characteristic chapters with filler dealt between them."""
    writer = FillerWriter(VOCABULARY, rng, subject=rng.choice(("the device", "the controller")))
    core = _core_chapters(spec, writer)
    title = f"{spec.maker} {spec.part_number} Sensor Controller - Datasheet, version {spec.version}"
    core_tokens = estimate_tokens(render([Document(title, tuple(core), "")]))
    dealt = spread(rng, writer.sections_of_size("f", num_tokens - core_tokens), len(core))
    chapters = [Section(c.id, c.title, c.blocks, (*c.children, *extra)) for c, extra in zip(core, dealt, strict=True)]
    return Document(title, tuple(chapters))


def _core_chapters(spec: Spec, writer: FillerWriter) -> list[Section]:
    q = spec.quantities
    electrical = Table(("Parameter", "Min", "Typ", "Max", "Unit"), tuple(_electrical_rows(q)))
    interfaces = Table(("Interface", "Maximum clock", "Unit"), tuple((q[k].label, q[k].value, q[k].unit) for k in ("spi", "i2c", "uart")))
    registers = Table(("Register", "Address", "Reset value", "Access", "Description"),
                      tuple((r.name, r.address, r.reset, r.access, REGISTERS[r.name]) for r in spec.registers))  # fmt: skip
    sentence = "The {phrase} is {value} {unit}."
    return [
        Section("overview", "Overview", (writer.paragraph(writer.vocabulary.topics[0]),), (
            Section("ordering", "Ordering information", (
                f"The device is ordered as part number {spec.part_number} in a {spec.package} package, "
                f"manufactured by {spec.maker}.",)),)),
        Section("characteristics", "Characteristics", (), (
            Section("electrical", "Electrical characteristics", ("Recommended operating conditions.", electrical)),
            Section("environment", "Operating environment", tuple(sentence.format(**vars(q[k])) for k in ("temp_min", "temp_max"))),
            Section("timing", "Timing", tuple(sentence.format(**vars(q[k])) for k in ("startup", "wakeup"))))),
        Section("interfacing", "Host interfaces", (), (Section("interfaces", "Interface limits", (interfaces,)),)),
        Section("register_map", "Register map", (), (Section("registers", "Registers", (registers,)),)),
        Section("errata", "Errata", ("The errata below apply only to the silicon revision they name.",),
                tuple(_erratum_section(spec, e) for e in spec.errata)),
    ]  # fmt: skip


def _electrical_rows(q: dict[str, Quantity]) -> list[tuple[str, ...]]:
    rows = []
    for label in dict.fromkeys(x.label for x in q.values() if x.handle == "electrical"):
        cells = {key.rpartition("_")[2]: x for key, x in q.items() if x.label == label}
        unit = next(iter(cells.values())).unit
        rows.append((label, *(cells[c].value if c in cells else "-" for c in ("min", "typ", "max")), unit))
    return rows


def erratum_phrase(spec: Spec, e: Erratum) -> str:
    """What an erratum states: `the <phrase> is <value> <unit>` (or a register's reset value)."""
    if e.target.startswith("reg:"):
        return f"the reset value of register {e.target[4:]} is {e.value}"
    quantity = spec.quantities[e.target]
    return f"the {quantity.phrase} is {e.value} {quantity.unit}"


def _erratum_section(spec: Spec, e: Erratum) -> Section:
    handle = "registers" if e.target.startswith("reg:") else spec.quantities[e.target].handle
    text = f"Silicon revision {e.revision}: {erratum_phrase(spec, e)} instead of the value given in [[{handle}]]."
    subject = e.target[4:] if e.target.startswith("reg:") else spec.quantities[e.target].phrase
    return Section(e.handle, f"Revision {e.revision}: {subject}", (text,))
