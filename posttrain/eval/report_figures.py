"""The run report's chart sections: the per-class heat map, learning curves per domain, domain weights.

Each function takes the files read by `posttrain.eval.report` and returns an HTML fragment with inline
SVG (`posttrain.eval.report_svg`). The heat map comes from `matrix.json` when the run has one (its
per-class aggregates, or the mean of its cells where an aggregate is missing), otherwise from the run's
own greedy evaluations grouped by class. Numbers are taken from the files; only means over domains and
the learning curves' moving average are computed here, and the page says so.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from html import escape
from itertools import accumulate
from typing import Any

from posttrain.eval.report_files import RunFiles
from posttrain.eval.report_svg import Cell, Curve, Marks, class_colours, heat_map, reward_chart, stacked_area

METRIC_PREFERENCE = ("reward", "pass@1", "mean_reward", "pass_rate")
"""The matrix metric the heat map shows: the first of these that the matrix has."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _or_nan(value: Any, default: float = math.nan) -> float:
    number = _number(value)
    return default if number is None else number


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _text(value: float, first: float | None) -> str:
    """The cell's text: its value, and its change from the first row's value when there is one."""
    if first is None:
        return f"{value:.2f}"
    return f"{value:.2f} ({value - first:+.2f})"


def heat_section(files: RunFiles) -> str:
    if files.matrix is not None and files.matrix.get("cells"):
        return _matrix_heat(files.matrix)
    return _eval_heat(files)


def _grid(rows: list[str], columns: list[str], values: dict[tuple[str, str], tuple[float, str]]) -> str:
    """Heat map cells from (row, column) -> (value, tooltip); each row's text shows its change from row 0."""
    cells = {}
    for (row, column), (value, tooltip) in values.items():
        first = values.get((rows[0], column)) if row != rows[0] else None
        cells[(row, column)] = Cell(value, _text(value, first[0] if first else None), tooltip)
    return heat_map(rows, columns, cells)


def _matrix_metric(metric_maps: Sequence[Any]) -> str | None:
    names = {k for m in metric_maps if isinstance(m, dict) for k in m}
    for name in METRIC_PREFERENCE:
        if name in names:
            return name
    return min(names) if names else None


def _matrix_heat(matrix: Mapping[str, Any]) -> str:
    domains = {d["domain_id"]: d for d in matrix.get("domains") or [] if isinstance(d, dict) and "domain_id" in d}
    cells = [c for c in matrix.get("cells") or [] if isinstance(c, dict)]
    aggregates = [a for a in (matrix.get("aggregates") or {}).get("class") or [] if isinstance(a, dict)]
    metric = _matrix_metric([c.get("metrics") for c in cells] + [a.get("metrics") for a in aggregates])
    if metric is None:
        return '<p class="muted">matrix.json has no metrics to show</p>'

    def class_of(domain: str) -> str:
        return str(domains.get(domain, {}).get("class") or domain.split("/", 1)[0])

    rows = [str(c["label"]) for c in matrix.get("checkpoints") or [] if isinstance(c, dict) and "label" in c]
    rows += [r for r in dict.fromkeys(str(c.get("checkpoint")) for c in cells) if r not in rows]
    columns = list(dict.fromkeys(class_of(str(c.get("domain_id", ""))) for c in cells))
    values: dict[tuple[str, str], tuple[float, str]] = {}
    for a in aggregates:
        m = (a.get("metrics") or {}).get(metric)
        value = _number(m.get("value")) if isinstance(m, dict) else None
        if isinstance(m, dict) and value is not None:
            key = (str(a.get("checkpoint")), str(a.get("class")))
            values[key] = (value, f"{key[0]} · {key[1]}: {metric} {value:.3f} [{_f(m.get('ci_low'))}, "
                                  f"{_f(m.get('ci_high'))}], n={m.get('n', a.get('n', '?'))}, "
                                  f"{len(a.get('domains') or [])} domains")  # fmt: skip
    by_key: dict[tuple[str, str], list[float]] = {}
    for c in cells:
        m = (c.get("metrics") or {}).get(metric)
        value = _number(m.get("value")) if isinstance(m, dict) else None
        if value is not None:
            by_key.setdefault((str(c.get("checkpoint")), class_of(str(c.get("domain_id", "")))), []).append(value)
    for key, items in by_key.items():
        if key not in values:
            mean = sum(items) / len(items)
            values[key] = (mean, f"{key[0]} · {key[1]}: mean {metric} {mean:.3f} over {len(items)} domains")
    return (f'<p class="muted">From matrix.json: {escape(metric)} per checkpoint and class (the mean of its '
            "domains' means; hover a cell for its 95% interval). In brackets: the change from the first "
            f"checkpoint.</p>{_grid(rows, columns, values)}")


def _f(value: Any) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.3f}"


def _eval_heat(files: RunFiles) -> str:
    if not files.evals:
        return '<p class="muted">no matrix.json and no eval_*.json in the run directory</p>'
    compared = (files.summary or {}).get("domains") or {}

    def column(domain: str) -> str:
        trained = (compared.get(domain) or {}).get("trained", True)
        return domain.split("/", 1)[0] + ("" if trained else " · untrained")

    rows = [e.label for e in files.evals]
    all_domains = list(dict.fromkeys(d for e in files.evals for d in e.domains))
    columns = list(dict.fromkeys(column(d) for d in all_domains))
    values: dict[tuple[str, str], tuple[float, str]] = {}
    for point in files.evals:
        for col in columns:
            rewards = [v for d, e in point.domains.items() if column(d) == col
                       and (v := _number(e.get("mean_reward"))) is not None]  # fmt: skip
            mean = _mean(rewards)
            if mean is not None:
                values[(point.label, col)] = (mean, f"{point.label} (step {point.step}) · {col}: mean greedy reward "
                                                    f"{mean:.3f} over {len(rewards)} domains")  # fmt: skip
    return ('<p class="muted">No matrix.json: mean held-out greedy reward of each class\'s domains at each '
            "evaluation of the run (eval_*.json), trained and untrained domains apart. In brackets: the change "
            f"from base.</p>{_grid(rows, columns, values)}")


def moving_average(steps: Sequence[int], values: Sequence[float], counts: Sequence[float],
                   half_width: int) -> list[float]:  # fmt: skip
    """At each step, the `counts`-weighted mean of the values within `half_width` steps of it (`steps`
    ascending): with per-step mean rewards and sample counts, the pooled mean of the window's samples."""
    weighted = list(accumulate((v * n for v, n in zip(values, counts, strict=True)), initial=0.0))
    totals = list(accumulate(counts, initial=0.0))
    out = []
    for centre in steps:
        low, high = bisect_left(steps, centre - half_width), bisect_right(steps, centre + half_width)
        total = totals[high] - totals[low]
        out.append((weighted[high] - weighted[low]) / total if total else math.nan)
    return out


def _domain_order(files: RunFiles) -> list[str]:
    listed = list(((files.summary or {}).get("domains") or {}).keys())
    logged = [k.removeprefix("domain/").rsplit("/", 1)[0] for r in files.rows for k in r
              if k.startswith("domain/") and k.endswith("/reward")]  # fmt: skip
    evaluated = [d for e in files.evals for d in e.domains]
    return list(dict.fromkeys(listed + logged + evaluated))


def curves_section(files: RunFiles) -> str:
    domains = _domain_order(files)
    if not domains:
        return '<p class="muted">no metrics.jsonl rows and no evaluations</p>'
    x_max = max([files.last_step] + [e.step for e in files.evals] + [1])
    half_width = max(2, x_max // 20)
    compared = (files.summary or {}).get("domains") or {}
    by_class: dict[str, list[str]] = {}
    for domain in domains:
        by_class.setdefault(domain.split("/", 1)[0], []).append(domain)
    parts = ['<p class="muted">Per domain: sampled train reward at each step (light line), its moving average '
             f"over ±{half_width} steps weighted by samples (dark line), and the held-out greedy evaluations "
             "with their 95% intervals (points; hover for the numbers).</p>"]
    for cls, members in by_class.items():
        cards = "".join(_curve_card(files, d, x_max, half_width, compared.get(d)) for d in members)
        parts.append(f'<h3>{escape(cls)}</h3><div class="cards">{cards}</div>')
    return "".join(parts)


def _curve_card(files: RunFiles, domain: str, x_max: int, half_width: int, compared: Any) -> str:
    key = f"domain/{domain}"
    sampled = [r for r in files.rows if _number(r.get(f"{key}/reward")) is not None]
    steps = [int(r["step"]) for r in sampled]
    rewards = [float(r[f"{key}/reward"]) for r in sampled]
    counts = [_or_nan(r.get(f"{key}/samples"), default=1.0) for r in sampled]
    curves = [Curve(steps, rewards, "train"), Curve(steps, moving_average(steps, rewards, counts, half_width), "smooth")]
    points = [(e.step, e.label, e.domains[domain]) for e in files.evals if domain in e.domains]
    marks = Marks(
        xs=[s for s, _, _ in points], ys=[_or_nan(e.get("mean_reward")) for _, _, e in points],
        lows=[_or_nan(e.get("ci_low")) for _, _, e in points], highs=[_or_nan(e.get("ci_high")) for _, _, e in points],
        labels=[f"{label} (step {s}): {_f(e.get('mean_reward'))} [{_f(e.get('ci_low'))}, {_f(e.get('ci_high'))}]"
                for s, label, e in points],
    )  # fmt: skip
    note = ""
    if isinstance(compared, dict):
        verdict = str(compared.get("verdict", ""))
        css = {"improved": "improved", "regressed": "regressed"}.get(verdict, "ns")
        untrained = "" if compared.get("trained", True) else " · untrained"
        note = (f'<div class="note">{_f(compared.get("base_reward"))} → {_f(compared.get("final_reward"))} '
                f'<span class="{css}">{escape(verdict)}</span>{untrained}</div>')
    chart = reward_chart(curves, marks, x_max, title=domain)
    return f'<div class="card" data-domain="{escape(domain)}"><div class="title">{escape(domain)}</div>{note}{chart}</div>'


def weights_section(files: RunFiles) -> str:
    domains = list(dict.fromkeys(k.removeprefix("domain/").rsplit("/", 1)[0] for r in files.rows for k in r
                                 if k.startswith("domain/") and k.endswith("/weight")))  # fmt: skip
    if not domains:
        return '<p class="muted">no mixture weights in metrics.jsonl</p>'
    steps = [int(r["step"]) for r in files.rows]
    layers = [[_or_nan(r.get(f"domain/{d}/weight")) for r in files.rows] for d in domains]  # [D, S]; nan draws as 0
    colours = class_colours(domains)
    chart = stacked_area(steps, layers, domains, colours)
    legend = "".join(
        f'<li><span class="swatch" style="background:{c}"></span>{escape(d)} {_f(values[-1])}</li>'
        for d, c, values in reversed(list(zip(domains, colours, layers, strict=True))))  # fmt: skip
    return ('<p class="muted">The sampling weight of each domain at each step, stacked (they sum to 1); one '
            "hue per class. Legend: top band first, with its last weight.</p>"
            f'{chart}<ul class="legend">{legend}</ul>')
