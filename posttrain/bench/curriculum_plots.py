"""PNG figures for the curriculum benchmark: learning curves and weight trajectories per mixture.

Uses matplotlib's non-interactive Agg backend; imported only when plots are asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def write_plots(raw: dict[str, Any], out: Path) -> list[str]:
    """One learning-curve and one weight-trajectory figure per world; returns the file names."""
    written = []
    for world, by_mixture in raw.items():
        written.append(_curves(world, by_mixture, out))
        written.append(_weights(world, by_mixture, out))
    return written


def _curves(world: str, by_mixture: dict[str, Any], out: Path) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    titles = ("mean true pass rate (learnable domains)", "fraction of learnable domains at target")
    for panel, (ax, title) in enumerate(zip(axes, titles, strict=True)):
        for index, (kind, data) in enumerate(by_mixture.items()):
            curves = np.asarray([pair[panel] for pair in data["curves"]])  # [seeds, T]
            mean = curves.mean(axis=0)
            half = 1.96 * curves.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * mean
            steps = np.arange(1, mean.size + 1)
            colour = plt.get_cmap("tab20")(index % 20)
            style = "--" if kind.startswith("default-") else "-"
            ax.plot(steps, mean, label=kind, lw=1.5, color=colour, ls=style)
            ax.fill_between(steps, mean - half, mean + half, alpha=0.2, color=colour)
        ax.set_xlabel("training step")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"world {world}: learning curves (mean and 95% CI over seeds)")
    name = f"curriculum_curves_{Path(world).stem}.png"
    fig.savefig(out / name, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return name


def _weights(world: str, by_mixture: dict[str, Any], out: Path) -> str:
    kinds = [k for k, d in by_mixture.items() if "weight_shares_seed0" in d]
    cols = 4
    rows = max(1, -(-len(kinds) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False, sharey=True)
    for ax, kind in zip(axes.ravel(), kinds, strict=False):
        shares = by_mixture[kind]["weight_shares_seed0"]
        labels = list(shares)
        stack = np.asarray([shares[label] for label in labels])
        ax.stackplot(np.arange(1, stack.shape[1] + 1), stack, labels=labels, alpha=0.8)
        ax.set_title(kind, fontsize=9)
        ax.set_ylim(0, 1)
    for ax in axes.ravel()[len(kinds):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"world {world}: batch share by domain type (seed 0)")
    name = f"curriculum_weights_{Path(world).stem}.png"
    fig.savefig(out / name, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return name
