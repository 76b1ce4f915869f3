"""PNG plots of a run from its `metrics.jsonl`: per-domain reward, pass rate and weight over steps."""

from __future__ import annotations

import json
from pathlib import Path


def write_plots(run_dir: Path) -> list[Path]:
    """Write `plots/{reward,pass_rate,weight}.png`; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    if not rows:
        return []
    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    # keys are domain/<class>/<family>/<domain>/<metric>
    domains = sorted({"/".join(k.split("/")[1:-1]) for row in rows for k in row if k.startswith("domain/")})
    written = []
    for metric in ("reward", "pass_rate", "weight"):
        fig, ax = plt.subplots(figsize=(9, 5))
        for domain in domains:
            key = f"domain/{domain}/{metric}"
            points = [(row["step"], row[key]) for row in rows if key in row]
            if points:
                ax.plot(*zip(*points, strict=True), label=domain, linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
        ax.set_title(f"per-domain {metric}")
        ax.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        path = out_dir / f"{metric}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
