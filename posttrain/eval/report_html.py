"""The run report's HTML: the page (inline CSS, one small inline script), tables and text sections.

`render(files)` returns the whole page. Every string read from the run directory — domain ids, config
text, alarm messages, model responses — passes through `html.escape` before it reaches the page; the
page's Content-Security-Policy allows no network and only the one script shipped here (by its SHA-256),
so even markup that slipped through could not load or run anything. The script only sorts tables and
marks the page ready (`<body data-ready="1">`). Charts come from `posttrain.eval.report_figures`.
Deterministic: the same files give the same bytes (no clock, no randomness).
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from posttrain.eval.report_figures import curves_section, heat_section, weights_section
from posttrain.eval.report_files import RunFiles

MAX_EXAMPLES = 5
"""Example responses shown per hacking alarm."""
MAX_RESPONSE_CHARS = 4000
"""Longest example response shown; a longer one is cut, saying how long it was."""

SCRIPT = """
function sortKey(cell) {
  var raw = cell.getAttribute("data-sort");
  var text = raw === null ? cell.textContent.trim() : raw;
  var number = parseFloat(text);
  return isNaN(number) ? text.toLowerCase() : number;
}
document.querySelectorAll("table.sortable th").forEach(function (th) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var index = th.cellIndex;
    var up = th.getAttribute("data-dir") !== "up";
    th.setAttribute("data-dir", up ? "up" : "down");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = sortKey(a.cells[index]), y = sortKey(b.cells[index]);
      if (typeof x !== typeof y) { x = String(x); y = String(y); }
      return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
document.body.setAttribute("data-ready", "1");
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 18px 40px;color:#1b1f24}
h1{font-size:22px;margin:22px 0 4px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #d8dee4;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}nav a{margin-right:12px}.muted{color:#57606a}.headline{font-size:15px;font-weight:600}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}th,td{padding:3px 8px;border-bottom:1px solid #e5e9ed;text-align:right;vertical-align:top;white-space:nowrap}
td.msg{white-space:normal;min-width:320px}
th{background:#f6f8fa;cursor:default}table.sortable th{cursor:pointer}td.text,th.text{text-align:left}tfoot td{font-weight:600}
.improved{color:#1a7f37}.regressed,.dropped,.fired{color:#cf222e;font-weight:600}.ns{color:#57606a}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;color:#fff}.pass{background:#1a7f37}.fail{background:#cf222e}.none{background:#8c959f}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap;word-break:break-word}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d8dee4;border-radius:6px;padding:6px 8px}.card .title{font-size:12px;font-weight:600}
.card .note{font-size:11px}svg text{font-size:10px;fill:#444}svg .tick{font-size:9px}svg .grid{stroke:#e5e9ed}
polyline{fill:none}polyline.train{stroke:#54aeff;stroke-width:1;opacity:.6}polyline.smooth{stroke:#0969da;stroke-width:2}
circle.eval{fill:#111}line.whisker{stroke:#111;stroke-width:1.5}rect.empty{fill:#f6f8fa}svg.heat text.col,svg.heat text.row{font-size:11px;fill:#1b1f24}
.legend{columns:3;font-size:12px;list-style:none;padding:0}.swatch{display:inline-block;width:10px;height:10px;margin-right:5px}
"""


def render(files: RunFiles) -> str:
    """The whole report page for `files`."""
    sections = [
        ("config", "Config", _config(files)),
        ("summary", "Base vs final", _summary_table(files)),
        ("classes", "Per-class heat map", heat_section(files)),
        ("gate", "Regression gate", _gate(files)),
        ("curves", "Learning curves", curves_section(files)),
        ("weights", "Domain weights", weights_section(files)),
        ("hacking", "Reward-hacking alarms", _hacking(files)),
        ("spotcheck", "Spot-check agreement", _spotcheck(files)),
    ]
    if files.problems:
        sections.append(("problems", "Problems", _list(files.problems)))
    nav = "".join(f'<a href="#{key}">{escape(title)}</a>' for key, title, _ in sections)
    body = "".join(f'<section id="{key}"><h2>{escape(title)}</h2>{html}</section>' for key, title, html in sections)
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    title = f"posttrain report: {files.run_dir.resolve().name}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>{_overview(files)}<nav>{nav}</nav>{body}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def fmt(value: Any, digits: int = 3, signed: bool = False) -> str:
    """A number with `digits` decimals (`+` when `signed`); `–` for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval(low: Any, high: Any, signed: bool = False) -> str:
    if fmt(low) == "–" or fmt(high) == "–":
        return "–"
    return f"[{fmt(low, signed=signed)}, {fmt(high, signed=signed)}]"


def _sort(value: Any) -> str:
    return f' data-sort="{value}"' if fmt(value) != "–" else ""


def _td(text: str, css: str = "", sort: Any = None) -> str:
    cls = f' class="{css}"' if css else ""
    return f"<td{cls}{_sort(sort) if sort is not None else ''}>{text}</td>"


def _list(items: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(str(i))}</li>" for i in items) + "</ul>"


def _overview(files: RunFiles) -> str:
    summary = files.summary or {}
    parts = []
    if summary.get("headline"):
        parts.append(f'<p class="headline">{escape(str(summary["headline"]))}</p>')
    facts = [("steps", summary.get("steps", files.last_step if files.rows else None)), ("seed", summary.get("seed")),
             ("base model sha256", str(summary.get("base_model_sha256", ""))[:16] or None),
             ("elapsed", f"{summary['elapsed_s']} s" if "elapsed_s" in summary else None)]  # fmt: skip
    shown = " · ".join(f"{escape(k)} {escape(str(v))}" for k, v in facts if v not in (None, ""))
    read = ["config.yaml"] * (files.config_text is not None) + ["summary.json"] * (files.summary is not None)
    read += ["metrics.jsonl"] * bool(files.rows) + [f"eval_{e.label}.json" for e in files.evals]
    if files.matrix is not None and files.matrix_path is not None:
        read.append(str(files.matrix_path))
    read += ["hacking.json"] * (files.hacking is not None)
    read += ["spotcheck/agreement.json"] * (files.agreement is not None)
    parts.append(f'<p class="muted">{shown}<br>run directory {escape(str(files.run_dir))}; read '
                 f"{escape(', '.join(read))}</p>")
    return "".join(parts)


def _config(files: RunFiles) -> str:
    if files.config_text is None:
        return '<p class="muted">no config.yaml in the run directory</p>'
    return (f"<details><summary>config.yaml (the resolved config, {len(files.config_text.splitlines())} lines)"
            f"</summary><pre>{escape(files.config_text)}</pre></details>")


VERDICT_CLASS = {"improved": "improved", "regressed": "regressed"}


def _verdict(entry: Mapping[str, Any]) -> str:
    verdict = str(entry.get("verdict", "–"))
    text = f'<span class="{VERDICT_CLASS.get(verdict, "ns")}">{escape(verdict)}</span>'
    if entry.get("dropped"):
        text += ' <span class="dropped">DROPPED</span>'
    return text


def _summary_table(files: RunFiles) -> str:
    summary = files.summary
    if not summary or not isinstance(summary.get("domains"), dict):
        return '<p class="muted">no summary.json (the run has not finished its final evaluation)</p>'
    domains = {d: e for d, e in summary["domains"].items() if isinstance(e, dict)}
    sampled = any("sampled" in e for e in domains.values())
    head = ["domain", "trained", "n", "base", "base 95% CI", "final", "final 95% CI", "Δ", "Δ 95% CI", "p",
            "verdict"] + ["sampled pass@1"] * sampled  # fmt: skip
    rows = []
    for domain, e in domains.items():
        base, final = e.get("base", {}), e.get("final", {})
        low, high = (list(e.get("delta_ci") or []) + [None, None])[:2]
        cells = [
            _td(escape(domain), "text domain"), _td("yes" if e.get("trained", True) else "no", "text trained"),
            _td(str(e.get("num_paired", "–")), "n", e.get("num_paired")),
            _td(fmt(e.get("base_reward")), "base", e.get("base_reward")),
            _td(interval(base.get("ci_low"), base.get("ci_high")), "ci"),
            _td(fmt(e.get("final_reward")), "final", e.get("final_reward")),
            _td(interval(final.get("ci_low"), final.get("ci_high")), "ci"),
            _td(fmt(e.get("delta_reward"), signed=True), "delta", e.get("delta_reward")),
            _td(interval(low, high, signed=True), "ci"), _td(fmt(e.get("p_value"), 3), "p", e.get("p_value")),
            _td(_verdict(e), "text verdict"),
        ]
        if sampled:
            s = e.get("sampled", {})
            text = (f"{fmt(s.get('base_pass_at_1'))} → {fmt(s.get('final_pass_at_1'))} "
                    f"({escape(str(s.get('verdict', '–')))})") if s else "–"
            cells.append(_td(text, "text sampled"))
        rows.append(f'<tr data-domain="{escape(domain)}">{"".join(cells)}</tr>')
    foot = [_mean_row("mean, trained", summary, len(head))]
    if isinstance(summary.get("untrained"), dict):
        foot.append(_mean_row("mean, untrained", summary["untrained"], len(head)))
    header = "".join(f'<th class="{"text" if h in ("domain", "trained", "verdict") else ""}">{escape(h)}</th>'
                     for h in head)  # fmt: skip
    return ('<p class="muted">Held-out greedy reward per domain, base model vs the final policy, paired on the '
            "same eval tasks (summary.json). Click a column to sort.</p>"
            f'<table class="sortable" id="summary-table"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot>{"".join(foot)}</tfoot></table>')


def _mean_row(label: str, block: Mapping[str, Any], num_columns: int) -> str:
    mean = block.get("mean_delta") or {}
    cells = [_td(escape(label), "text"), _td(""), _td(str(block.get("num_domains", "–"))),
             _td(fmt(block.get("mean_base_reward")), "base"), _td(""),
             _td(fmt(block.get("mean_final_reward")), "final"), _td(""),
             _td(fmt(mean.get("delta"), signed=True), "delta"),
             _td(interval(mean.get("ci_low"), mean.get("ci_high"), signed=True), "ci"),
             _td(fmt(mean.get("p_value"))), _td(_verdict(mean), "text verdict")]  # fmt: skip
    cells += [_td("")] * (num_columns - len(cells))
    return f'<tr data-mean="{escape(label)}">{"".join(cells)}</tr>'


def _badge(passed: bool | None, text: str) -> str:
    css = "none" if passed is None else "pass" if passed else "fail"
    return f'<span class="badge {css}">{escape(text)}</span>'


def _gate(files: RunFiles) -> str:
    gate = (files.matrix or {}).get("gate")
    if isinstance(gate, dict):
        return _matrix_gate(gate)
    untrained = (files.summary or {}).get("untrained")
    if isinstance(untrained, dict):
        dropped = [str(d) for d in untrained.get("dropped") or []]
        verdict = _badge(not dropped, "no untrained domain dropped" if not dropped else f"{len(dropped)} dropped")
        return (f"<p>{verdict} No matrix.json with a gate; from summary.json: {untrained.get('num_domains', '–')} "
                "untrained domains (evaluated, never trained on), a drop flagged when the reward falls beyond "
                "the run's threshold with its interval below zero.</p>" + (_list(dropped) if dropped else ""))
    return ('<p class="muted">No regression gate: no matrix.json with a gate and no untrained domains in '
            "summary.json.</p>")


def _matrix_gate(gate: Mapping[str, Any]) -> str:
    passed = gate.get("passed")
    badge = _badge(passed if isinstance(passed, bool) else None,
                   "PASSED" if passed is True else "FAILED" if passed is False else "unknown")
    facts = " · ".join(f"{escape(k)} {escape(str(gate[k]))}" for k in ("base", "metric", "margin") if k in gate)
    parts = [f"<p>{badge} {facts}</p>"]
    checkpoints = [c for c in gate.get("checkpoints") or [] if isinstance(c, dict)]
    if checkpoints:
        rows = "".join(
            f'<tr><td class="text">{escape(str(c.get("checkpoint", "–")))}</td><td class="text">'
            f'{_badge(c.get("passed"), "passed" if c.get("passed") else "failed")}</td><td class="text">'
            f'{escape(", ".join(_offender(o) for o in c.get("offenders") or []))}</td></tr>'
            for c in checkpoints)  # fmt: skip
        parts.append('<table><thead><tr><th class="text">checkpoint</th><th class="text">gate</th>'
                     f'<th class="text">offenders</th></tr></thead><tbody>{rows}</tbody></table>')
    regressed = [(str(c.get("checkpoint", "–")), r) for c in checkpoints
                 for r in list(c.get("domains") or []) + list(c.get("classes") or [])
                 if isinstance(r, dict) and r.get("regressed")]  # fmt: skip
    regressed += [(str(o.get("checkpoint", "–")), o) for o in gate.get("offenders") or [] if isinstance(o, dict)]
    if regressed:
        rows = "".join(
            f'<tr><td class="text">{escape(c)}</td><td class="text">{escape(_offender(r))}</td>'
            f'<td>{fmt(r.get("base"))}</td><td>{fmt(r.get("checkpoint"))}</td>'
            f'<td>{fmt(r.get("delta"), signed=True)}</td><td>{interval(r.get("ci_low"), r.get("ci_high"), True)}</td>'
            f'<td>{fmt(r.get("p_value"))}</td></tr>' for c, r in regressed)  # fmt: skip
        parts.append('<h3>Regressions</h3><table><thead><tr><th class="text">checkpoint</th><th class="text">domain '
                     "or class</th><th>base</th><th>checkpoint</th><th>Δ</th><th>Δ 95% CI</th><th>p</th></tr>"
                     f"</thead><tbody>{rows}</tbody></table>")
    return "".join(parts)


def _offender(item: Any) -> str:
    """A gate offender's name: a string as is, or a record's `name`, `domain_id` or `class`."""
    if isinstance(item, dict):
        for key in ("name", "domain_id", "class"):
            if key in item:
                return ("class " if key == "class" else "") + str(item[key])
        return "?"
    return str(item)


def _hacking(files: RunFiles) -> str:
    doc = files.hacking
    if doc is None:
        return '<p class="muted">no hacking.json in the run directory</p>'
    alarms = [a for a in doc.get("alarms") or [] if isinstance(a, dict)]
    fired = sum(bool(a.get("fired")) for a in alarms)
    parts = [f"<p>{_badge(fired == 0, f'{fired} of {len(alarms)} checks fired')}</p>"]
    rows = []
    for alarm in sorted(alarms, key=lambda a: not a.get("fired")):
        status = '<span class="fired">fired</span>' if alarm.get("fired") else "ok"
        rows.append(f'<tr class="alarm"><td class="text">{escape(str(alarm.get("detector", "–")))}</td>'
                    f'<td class="text">{escape(str(alarm.get("domain_id", "–")))}</td><td class="text">{status}</td>'
                    f'<td>{fmt(alarm.get("value"))}</td><td>{fmt(alarm.get("threshold"))}</td>'
                    f'<td class="text msg">{escape(str(alarm.get("message", "")))}{_examples(alarm)}</td></tr>')
    if rows:
        parts.append('<table><thead><tr><th class="text">detector</th><th class="text">domain</th>'
                     '<th class="text">status</th><th>value</th><th>threshold</th><th class="text">message</th>'
                     f'</tr></thead><tbody>{"".join(rows)}</tbody></table>')
    return "".join(parts)


def _examples(alarm: Mapping[str, Any]) -> str:
    examples = [e for e in alarm.get("examples") or [] if isinstance(e, dict)]
    if not examples:
        return ""
    shown = []
    for example in examples[:MAX_EXAMPLES]:
        response = str(example.get("response", ""))
        cut = f" (first {MAX_RESPONSE_CHARS} of {len(response)} characters)" if len(response) > MAX_RESPONSE_CHARS else ""
        extra = ", ".join(f"{escape(str(k))} {escape(str(v)[:200])}" for k, v in example.items()
                          if k not in ("response", "reward"))  # fmt: skip
        shown.append(f'<div class="example"><span class="muted">reward {fmt(example.get("reward"))}'
                     f"{'; ' + extra if extra else ''}{cut}</span>"
                     f"<pre>{escape(response[:MAX_RESPONSE_CHARS])}</pre></div>")
    opened = " open" if alarm.get("fired") else ""
    return f"<details{opened}><summary>{len(examples)} example responses</summary>{''.join(shown)}</details>"


def _spotcheck(files: RunFiles) -> str:
    domains = (files.agreement or {}).get("domains")
    if not isinstance(domains, dict):
        return '<p class="muted">no spotcheck/agreement.json in the run directory</p>'

    def row(name: str, e: Mapping[str, Any]) -> str:
        return (f'<tr><td class="text">{escape(name)}</td><td>{escape(str(e.get("n", "–")))}</td>'
                f'<td>{fmt(e.get("agreement"))}</td><td>{interval(e.get("ci_low"), e.get("ci_high"))}</td></tr>')

    rows = "".join(row(str(d), e) for d, e in domains.items() if isinstance(e, dict))
    overall = files.agreement.get("overall") if files.agreement else None
    foot = f"<tfoot>{row('all domains', overall)}</tfoot>" if isinstance(overall, dict) else ""
    return ('<p class="muted">Spot checks: how often the reviewers\' verdicts agreed with the verifier\'s on '
            'the responses they reviewed, with 95% intervals.</p><table class="sortable"><thead><tr>'
            '<th class="text">domain</th><th>n</th><th>agreement</th><th>95% CI</th></tr></thead>'
            f"<tbody>{rows}</tbody>{foot}</table>")
