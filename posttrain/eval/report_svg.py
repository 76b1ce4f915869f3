"""Inline SVG charts for the run report: a reward chart, a stacked area and a heat map, as strings.

Pure functions of their numbers and labels. Every label is escaped (`html.escape`), so text read from a
run directory cannot become markup; a value that is not finite is left out (a gap, an empty cell) rather
than drawn at a made-up place. No fonts, images or scripts: the SVG is plain shapes and text.
Not here: reading files or choosing what to plot (`posttrain.eval.report_html`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

CLASS_HUES = (210, 28, 130, 280, 0, 52, 180, 320, 95, 240)
"""Hue per domain class (in order of first appearance) in the mixture chart."""


@dataclass(frozen=True)
class Curve:
    """A line through (x, y) points; points with a non-finite y are skipped."""

    xs: Sequence[float]
    ys: Sequence[float]
    css_class: str


@dataclass(frozen=True)
class Marks:
    """Points with vertical interval whiskers (e.g. evaluations with their 95% intervals)."""

    xs: Sequence[float]
    ys: Sequence[float]
    lows: Sequence[float]
    highs: Sequence[float]
    labels: Sequence[str]


def _finite(*values: float) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def _num(value: float) -> str:
    return f"{value:.1f}"


class _Frame:
    """Maps data coordinates (x in [0, x_max], y in [0, 1]) onto a plot area inside the SVG box."""

    def __init__(self, width: int, height: int, x_max: float, left: int = 30, bottom: int = 18) -> None:
        self.width, self.height = width, height
        self.left, self.top, self.right, self.bottom = left, 6, 6, bottom
        self.x_max = max(x_max, 1e-9)

    def x(self, value: float) -> float:
        return self.left + (self.width - self.left - self.right) * value / self.x_max

    def y(self, value: float) -> float:
        span = self.height - self.top - self.bottom
        return self.top + span * (1.0 - min(max(value, -0.05), 1.05))

    def axes(self, x_label: str) -> str:
        parts = []
        for tick in (0.0, 0.5, 1.0):
            y = _num(self.y(tick))
            parts.append(f'<line class="grid" x1="{self.left}" x2="{self.width - self.right}" y1="{y}" y2="{y}"/>')
            parts.append(f'<text class="tick" x="{self.left - 3}" y="{y}" text-anchor="end" '
                         f'dominant-baseline="middle">{tick:g}</text>')
        base = _num(self.height - self.bottom + 11)
        parts.append(f'<text class="tick" x="{self.left}" y="{base}">0</text>')
        parts.append(f'<text class="tick" x="{self.width - self.right}" y="{base}" text-anchor="end">'
                     f"{escape(x_label)}</text>")
        return "".join(parts)


def reward_chart(curves: Sequence[Curve], marks: Marks | None, x_max: float, title: str,
                 width: int = 260, height: int = 150) -> str:  # fmt: skip
    """Lines and interval marks on y in [0, 1] against step in [0, x_max]; `title` is the SVG's title."""
    frame = _Frame(width, height, x_max)
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img"><title>{escape(title)}</title>', frame.axes(f"step {x_max:g}")]
    for curve in curves:
        points = [f"{_num(frame.x(x))},{_num(frame.y(y))}" for x, y in zip(curve.xs, curve.ys, strict=True)
                  if _finite(x, y)]  # fmt: skip
        if points:
            parts.append(f'<polyline class="{escape(curve.css_class)}" points="{" ".join(points)}"/>')
    if marks is not None:
        for x, y, low, high, label in zip(marks.xs, marks.ys, marks.lows, marks.highs, marks.labels, strict=True):
            if not _finite(x, y):
                continue
            cx = _num(frame.x(x))
            if _finite(low, high):
                parts.append(f'<line class="whisker" x1="{cx}" x2="{cx}" y1="{_num(frame.y(low))}" '
                             f'y2="{_num(frame.y(high))}"/>')
            parts.append(f'<circle class="eval" cx="{cx}" cy="{_num(frame.y(y))}" r="3">'
                         f"<title>{escape(label)}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def class_colours(domains: Sequence[str]) -> list[str]:
    """One hue per class (the id's first part), one lightness per domain within it: classes read as blocks."""
    classes = list(dict.fromkeys(d.split("/", 1)[0] for d in domains))
    members = {c: [d for d in domains if d.split("/", 1)[0] == c] for c in classes}
    colours = []
    for domain in domains:
        cls = domain.split("/", 1)[0]
        hue = CLASS_HUES[classes.index(cls) % len(CLASS_HUES)]
        index, size = members[cls].index(domain), len(members[cls])
        colours.append(f"hsl({hue} 60% {35 + 40 * index / max(size - 1, 1):.0f}%)")
    return colours


def stacked_area(steps: Sequence[float], layers: Sequence[Sequence[float]], labels: Sequence[str],
                 colours: Sequence[str], width: int = 720, height: int = 260) -> str:  # fmt: skip
    """Layers stacked bottom-up over `steps` (ascending); each band a polygon titled with its label.
    Values that are not finite count as 0."""
    x_max = max(steps[-1], 1) if steps else 1
    frame = _Frame(width, height, x_max)
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'role="img"><title>domain sampling weights per step</title>', frame.axes(f"step {x_max:g}")]
    lower = [0.0] * len(steps)
    for values, label, colour in zip(layers, labels, colours, strict=True):
        upper = [lo + (v if _finite(v) else 0.0) for lo, v in zip(lower, values, strict=True)]
        top = [f"{_num(frame.x(s))},{_num(frame.y(u))}" for s, u in zip(steps, upper, strict=True)]
        bottom = [f"{_num(frame.x(s))},{_num(frame.y(lo))}" for s, lo in zip(steps, lower, strict=True)]
        if len(steps) == 1:  # one step has no width: draw it as a thin bar
            top = [f"{_num(frame.x(0))},{_num(frame.y(upper[0]))}", top[0]]
            bottom = [bottom[0], f"{_num(frame.x(0))},{_num(frame.y(lower[0]))}"]
        points = " ".join(top + bottom[::-1])
        parts.append(f'<polygon points="{points}" style="fill:{escape(colour)}"><title>{escape(label)}'
                     f"</title></polygon>")
        lower = upper
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Cell:
    """One heat-map cell: a value in [0, 1] (None: empty), its text and its tooltip."""

    value: float | None
    text: str
    tooltip: str


def _fill(value: float) -> tuple[str, str]:
    """(fill, text colour): white to dark blue as the value goes from 0 to 1."""
    t = min(max(value, 0.0), 1.0)
    low, high = (247, 251, 255), (8, 48, 107)
    r, g, b = (round(a + (z - a) * t) for a, z in zip(low, high, strict=True))
    return f"rgb({r},{g},{b})", "#fff" if t > 0.55 else "#111"


def heat_map(rows: Sequence[str], columns: Sequence[str], cells: dict[tuple[str, str], Cell],
             cell_width: int = 124, cell_height: int = 34, label_width: int = 120) -> str:  # fmt: skip
    """A rows x columns grid coloured by value; missing cells are blank. Labels are escaped."""
    header = 44
    width = label_width + cell_width * len(columns) + 4
    height = header + cell_height * len(rows) + 4
    parts = [f'<svg class="heat" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">'
             "<title>heat map</title>"]
    for j, column in enumerate(columns):
        x = label_width + cell_width * j + cell_width / 2
        parts.append(f'<text class="col" x="{_num(x)}" y="{header - 8}" text-anchor="middle">'
                     f"{escape(column)}</text>")
    for i, row in enumerate(rows):
        y = header + cell_height * i
        parts.append(f'<text class="row" x="{label_width - 6}" y="{_num(y + cell_height / 2)}" '
                     f'text-anchor="end" dominant-baseline="middle">{escape(row)}</text>')
        for j, column in enumerate(columns):
            cell = cells.get((row, column))
            x = label_width + cell_width * j
            if cell is None or cell.value is None or not _finite(cell.value):
                parts.append(f'<rect class="empty" x="{x}" y="{y}" width="{cell_width - 2}" '
                             f'height="{cell_height - 2}"/>')
                continue
            fill, ink = _fill(cell.value)
            parts.append(f'<g><title>{escape(cell.tooltip)}</title><rect x="{x}" y="{y}" width="{cell_width - 2}" '
                         f'height="{cell_height - 2}" style="fill:{fill}"/><text x="{_num(x + cell_width / 2 - 1)}" '
                         f'y="{_num(y + cell_height / 2)}" text-anchor="middle" dominant-baseline="middle" '
                         f'style="fill:{ink}">{escape(cell.text)}</text></g>')
    parts.append("</svg>")
    return "".join(parts)
