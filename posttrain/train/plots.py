"""PNG plots of a run directory: per-domain reward as small multiples, and the domain mixture over steps.

`plots/reward.png` has one panel per domain, all on the same axes (step; reward in [0, 1]). Each panel
shows the sampled train reward of every step as faint points, its centred moving average (`smooth`:
pooled over the samples of the steps within +-`smoothing_half_width(last step)` steps, so a step with
more samples counts more and the line does not lag), and the held-out greedy evaluations as points
with their 95% bootstrap intervals: `eval_base.json` at step 0, `eval_step<N>.json` (`eval.every_steps`)
at step N, `eval_final.json` at the last step. Train and eval rewards are different quantities (sampled
at the training temperature on the train split vs greedy on the eval split). The panel's note is base
-> final and the verdict from `summary.json`; the figure's title carries its `headline`.

`plots/mixture.png` stacks the sampling weights logged at each step (they sum to 1).

`plots/agent.png`, only when an evaluation has episode metrics (`DomainEval.agent`, agent domains), has
one panel per agent domain: success rate and recovery rate at each eval point with their 95% intervals,
and completion; a run without agent domains gets no such file and its other plots are unchanged.

No pass-rate view: it is the reward for every pass/fail domain, and `metrics.jsonl` and `summary.json`
keep it for the others. Everything is read from the run directory's files; no evaluation number or
interval is recomputed here, so a plot and `summary.json` cannot disagree. Matplotlib loads only when
plots are drawn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain.eval.report_figures import moving_average

VERDICT_NOTES = {"improved": ("improved", "tab:green"), "regressed": ("regressed", "tab:red")}
"""Verdict -> (note, colour); anything else is noted `n.s.` in grey."""

CLASS_COLOURS = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys")
"""Colour maps of the mixture plot, one per domain class (the first part of a domain id)."""


def write_plots(run_dir: Path) -> list[Path]:
    """Write `plots/reward.png` and `plots/mixture.png`; returns the files written (none without steps)."""
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        return []
    import matplotlib

    matplotlib.use("Agg")
    last_step = int(rows[-1]["step"])
    domains = _domain_ids(rows)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    reward, mixture = out_dir / "reward.png", out_dir / "mixture.png"
    # untrained domains have evaluations but no train samples: the summary lists every domain
    panels = list(summary.get("domains", {})) or domains
    _plot_rewards(rows, read_evals(run_dir, last_step), summary, panels, reward)
    _plot_mixture(rows, domains, mixture)
    written = [reward, mixture]
    evals = read_evals(run_dir, last_step)
    agents = agent_domains(evals)
    if agents:
        written.append(out_dir / "agent.png")
        _plot_agents(evals, agents, written[-1])
    return written


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of `metrics.jsonl` by step; a step logged twice (a resume after it) keeps its last row."""
    if not path.is_file():
        return []
    by_step = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_step[int(row["step"])] = row
    return [by_step[s] for s in sorted(by_step)]


def read_evals(run_dir: Path, last_step: int) -> dict[int, dict[str, dict[str, Any]]]:
    """Step -> domain -> greedy eval (`DomainEval.to_dict`): base at 0, `step<N>` at N, final at `last_step`.
    Sampled evals (`eval_<label>_sampled.json`) are left out."""
    evals = {}
    for path in run_dir.glob("eval_*.json"):
        step = _eval_step(path.stem.removeprefix("eval_"), last_step)
        if step is not None:
            evals[step] = json.loads(path.read_text())
    return dict(sorted(evals.items()))


def _eval_step(label: str, last_step: int) -> int | None:
    """The step an eval label was taken at (`Run.evaluate`'s labels), None for other files."""
    if label == "base":
        return 0
    if label == "final":
        return last_step
    periodic = re.fullmatch(r"step(\d+)", label)
    return int(periodic[1]) if periodic else None


def smoothing_half_width(last_step: int) -> int:
    """Steps on each side of the moving average: a 21-step window over 200 steps, at least 5 steps."""
    return max(2, last_step // 20)


def smooth(
    steps: Sequence[int], values: Sequence[float], counts: Sequence[float], half_width: int
) -> list[float]:
    """Centred moving average: at each step, the `counts`-weighted mean of the values whose step is within
    `half_width` steps of it (`steps` ascending). The window spans steps, not points, so a step where the
    domain was not sampled is simply absent from it, and it shrinks at the ends. With per-step mean
    rewards and sample counts, this is the pooled mean reward of every sample in the window (the same
    average the HTML report draws, `posttrain.eval.report_figures.moving_average`)."""
    return moving_average(steps, values, counts, half_width)


def _domain_ids(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Domain ids in their logged order (keys are `domain/<class>/<family>/<domain>/<metric>`)."""
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            if key.startswith("domain/"):
                seen.setdefault(key.removeprefix("domain/").rsplit("/", 1)[0])
    return list(seen)


def _short_ids(domains: Sequence[str]) -> list[str]:
    """The last part of each id (`add@easy`), or `family/domain` where the last parts collide."""
    short = [d.rsplit("/", 1)[-1] for d in domains]
    if len(set(short)) == len(short):
        return short
    return [d.split("/", 1)[-1] for d in domains]


def _plot_rewards(
    rows: Sequence[dict[str, Any]],
    evals: dict[int, dict[str, dict[str, Any]]],
    summary: dict[str, Any],
    domains: Sequence[str],
    path: Path,
) -> None:
    import matplotlib.pyplot as plt

    num_cols = min(4, len(domains))
    num_rows = math.ceil(len(domains) / num_cols)
    size_in = (max(3.3 * num_cols, 8.0), 2.6 * num_rows + 0.9)  # wide enough for the headline
    fig, axes = plt.subplots(num_rows, num_cols, figsize=size_in, sharex=True, sharey=True, squeeze=False,
                             layout="constrained")
    half_width = smoothing_half_width(int(rows[-1]["step"]))
    for ax, domain, title in zip(axes.flat, domains, _short_ids(domains), strict=False):
        key = f"domain/{domain}"
        sampled = [r for r in rows if f"{key}/reward" in r]
        steps = [int(r["step"]) for r in sampled]
        values = [float(r[f"{key}/reward"]) for r in sampled]
        counts = [float(r.get(f"{key}/samples", 1)) for r in sampled]
        ax.scatter(steps, values, s=5, color="tab:blue", alpha=0.3, linewidths=0,
                   label="train reward (sampled)")
        ax.plot(steps, smooth(steps, values, counts, half_width), color="tab:blue", linewidth=1.6,
                label=f"moving average (±{half_width} steps)")
        _plot_evals(ax, domain, evals)
        compared = summary.get("domains", {}).get(domain)
        untrained = compared is not None and not compared.get("trained", True)
        ax.set_title(f"{title} (untrained)" if untrained else title, fontsize=10)
        _annotate(ax, compared)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(domains):]:
        ax.set_visible(False)
    axes[0, 0].set_ylim(-0.03, 1.03)  # a margin keeps points at 0 and 1 whole
    for ax in axes[-1]:
        ax.set_xlabel("step")
        ax.xaxis.set_tick_params(labelbottom=True)
    for ax in axes[:, 0]:
        ax.set_ylabel("reward")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    title = "per-domain reward: train samples vs held-out greedy eval"
    if summary.get("headline"):
        title += "\n" + summary["headline"].replace("; ", "\n")  # one line per clause
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_evals(ax: Any, domain: str, evals: dict[int, dict[str, dict[str, Any]]]) -> None:
    points = [(step, e[domain]) for step, e in evals.items() if domain in e]
    if not points:
        return
    steps = [s for s, _ in points]
    means = [float(e["mean_reward"]) for _, e in points]
    # No interval (no graded task) draws the point alone: a nan bar is not drawn.
    below = [m - float(e.get("ci_low", math.nan)) for m, (_, e) in zip(means, points, strict=True)]
    above = [float(e.get("ci_high", math.nan)) - m for m, (_, e) in zip(means, points, strict=True)]
    ax.errorbar(steps, means, yerr=[below, above], fmt="o", color="black", markersize=4, capsize=3,
                elinewidth=1.2, label="held-out greedy eval, 95% CI", zorder=3)


def _annotate(ax: Any, comparison: dict[str, Any] | None) -> None:
    """`base -> final` and the verdict in the panel's top-left corner."""
    if comparison is None:
        return
    note, colour = VERDICT_NOTES.get(comparison["verdict"], ("n.s.", "dimgrey"))
    text = f"{comparison['base_reward']:.2f} → {comparison['final_reward']:.2f}  {note}"
    ax.text(0.03, 0.95, text, transform=ax.transAxes, ha="left", va="top", fontsize=8, color=colour,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5})


def agent_domains(evals: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """Domains with episode metrics in any evaluation, in the order they first appear."""
    seen: dict[str, None] = {}
    for result in evals.values():
        for domain, entry in result.items():
            if entry.get("agent"):
                seen.setdefault(domain)
    return list(seen)


AGENT_SERIES = (("success_rate", "success", "tab:green"), ("recovery_rate", "recovery", "tab:orange"))
"""Episode metrics drawn with their intervals: (key, label, colour)."""


def _plot_agents(evals: dict[int, dict[str, dict[str, Any]]], domains: Sequence[str], path: Path) -> None:
    import matplotlib.pyplot as plt

    num_cols = min(4, len(domains))
    num_rows = math.ceil(len(domains) / num_cols)
    fig, axes = plt.subplots(num_rows, num_cols, figsize=(max(3.3 * num_cols, 8.0), 2.6 * num_rows + 0.9),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")  # fmt: skip
    for ax, domain, title in zip(axes.flat, domains, _short_ids(domains), strict=False):
        points = [(step, r[domain]["agent"]) for step, r in evals.items() if r.get(domain, {}).get("agent")]
        for key, label, colour in AGENT_SERIES:
            _plot_agent_series(ax, points, key, label, colour)
        steps = [s for s, _ in points]
        ax.plot(steps, [float(m["completion"]) for _, m in points], "s--", color="tab:blue", markersize=3,
                linewidth=1.0, label="completion")  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(domains):]:
        ax.set_visible(False)
    axes[0, 0].set_ylim(-0.03, 1.03)
    for ax in axes[-1]:
        ax.set_xlabel("step")
        ax.xaxis.set_tick_params(labelbottom=True)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=9, frameon=False)
    fig.suptitle("agent domains: held-out greedy episodes (95% CI)", fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_agent_series(ax: Any, points: Sequence[tuple[int, dict[str, Any]]], key: str, label: str,
                       colour: str) -> None:  # fmt: skip
    """`key` at each eval point that has it (recovery needs an episode with a tool error), with its interval."""
    present = [(step, m) for step, m in points if key in m]
    means = [float(m[key]) for _, m in present]
    below = [v - float(m.get(f"{key}_ci_low", math.nan)) for v, (_, m) in zip(means, present, strict=True)]
    above = [float(m.get(f"{key}_ci_high", math.nan)) - v for v, (_, m) in zip(means, present, strict=True)]
    ax.errorbar([s for s, _ in present], means, yerr=[below, above], fmt="o-", color=colour, markersize=4,
                capsize=3, elinewidth=1.2, linewidth=1.0, label=label)  # fmt: skip


def _plot_mixture(rows: Sequence[dict[str, Any]], domains: Sequence[str], path: Path) -> None:
    import matplotlib.pyplot as plt

    steps = [int(r["step"]) for r in rows]
    weights = [[float(r.get(f"domain/{d}/weight", 0.0)) for r in rows] for d in domains]  # [D, S]
    fig, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    ax.stackplot(steps, weights, labels=list(domains), colors=_class_colours(domains), linewidth=0.3,
                 edgecolor="white")
    if steps[-1] > steps[0]:  # one step has no width to fill
        ax.set_xlim(steps[0], steps[-1])
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("step")
    ax.set_ylabel("sampling weight (stacked)")
    ax.set_title("domain sampling weights per step (they sum to 1)", fontsize=11)
    # Reversed so the legend reads top to bottom in the order the bands are stacked.
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles[::-1], labels[::-1], loc="outside right upper", fontsize=8, frameon=False)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _class_colours(domains: Sequence[str]) -> list[Any]:
    """One colour map per domain class and one shade per domain within it, so classes read as blocks."""
    import matplotlib

    classes = list(dict.fromkeys(d.split("/", 1)[0] for d in domains))
    members = {c: [d for d in domains if d.split("/", 1)[0] == c] for c in classes}
    colours = []
    for domain in domains:
        cls = domain.split("/", 1)[0]
        cmap = matplotlib.colormaps[CLASS_COLOURS[classes.index(cls) % len(CLASS_COLOURS)]]
        index, size = members[cls].index(domain), len(members[cls])
        colours.append(cmap(0.85 - 0.5 * index / max(size - 1, 1)))
    return colours
