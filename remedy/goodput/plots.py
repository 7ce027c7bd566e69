"""Pictures of a policy comparison: goodput by policy and the distribution of job downtime per incident.

One function for `remedy simulate --plot`, the simulation flow's artifact and `bench/policies.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from remedy.goodput.compare import pooled_goodput
from remedy.goodput.results import SimResult

COLOURS = ["#999999", "#d95f02", "#7570b3", "#1b9e77", "#66a61e", "#e6ab02", "#a6761d"]


def plot_comparison(results: Mapping[tuple[str, str], Sequence[SimResult]], path: str | Path) -> Path:
    """Two rows of panels (one column per scenario): goodput by policy (bars, auto-replace's level dashed) and
    downtime per incident (box plots, log scale). Written as PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    scenarios = list(dict.fromkeys(sc for sc, _ in results))
    fig, axes = plt.subplots(2, len(scenarios), figsize=(5.5 * len(scenarios), 8), squeeze=False)
    for col, sc in enumerate(scenarios):
        names = [p for s, p in results if s == sc]
        goods = [pooled_goodput(results[(sc, p)]) * 100 for p in names]
        ax = axes[0][col]
        ax.bar(range(len(names)), goods, color=[COLOURS[i % len(COLOURS)] for i in range(len(names))])
        if (sc, "auto-replace") in results:
            ax.axhline(pooled_goodput(results[(sc, "auto-replace")]) * 100, color="#333", ls="--", lw=0.8)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{sc}: goodput")
        ax.set_ylabel("goodput %")
        ax.set_ylim(max(0.0, min(goods) - 8), 100)
        for i, g in enumerate(goods):
            ax.text(i, g + 0.3, f"{g:.1f}", ha="center", fontsize=8)
        ax = axes[1][col]
        data = [[max(d, 0.1) for r in results[(sc, p)] for d in r.downtimes_minutes] or [0.1] for p in names]
        ax.boxplot(data, tick_labels=names, showfliers=True, whis=(10, 90))
        ax.set_yscale("log")
        ax.set_title(f"{sc}: job downtime per incident")
        ax.set_ylabel("minutes (log)")
        ax.tick_params(axis="x", rotation=30, labelsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
