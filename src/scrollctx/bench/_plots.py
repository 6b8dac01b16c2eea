"""PNG plots of a report with matplotlib (Agg backend, imported on first use).

- ``cost_<section>.png``: per-task input tokens, output tokens and turns as box plots, one box per
  system (like the paper's Figure 4): boxes span the IQR with the median marked, red diamonds
  are means, log scale for tokens.
- ``accuracy_<section>.png``: accuracy per category per system, grouped bars.

A missing matplotlib raises :class:`~scrollctx.errors.MissingDependency` naming the ``bench``
extra.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from scrollctx.bench._tables import Section
from scrollctx.errors import MissingDependency

__all__ = ["plot_accuracy", "plot_cost", "slug"]

_PANELS = (
    ("tokens_in", "(a) input tokens", True),
    ("tokens_out", "(b) output tokens", True),
    ("turns", "(c) agent turns", False),
)


def slug(section: Section) -> str:
    """A file-name-safe name for a section (``beam_100K``)."""
    raw = f"{section.benchmark}_{section.size}" if section.size else section.benchmark
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependency("matplotlib", "bench") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_cost(section: Section, out_dir: Path) -> Path:
    """Draw the three per-task cost box plots of ``section``; return the PNG path."""
    plt = _pyplot()
    figure, axes = plt.subplots(1, 3, figsize=(4.2 * 3, 3.8))
    for axis, (name, title, log) in zip(axes, _PANELS, strict=True):
        data = [section.values.get(name, {}).get(system, []) for system in section.systems]
        shown = [values if values else [float("nan")] for values in data]
        axis.boxplot(
            shown,
            showmeans=True,
            meanprops={"marker": "D", "markerfacecolor": "red", "markeredgecolor": "red"},
        )
        axis.set_xticks(
            range(1, len(section.systems) + 1), section.systems, rotation=30, ha="right", fontsize=8
        )
        axis.set_title(title, fontsize=10)
        if log and any(v > 0 for values in data for v in values):
            axis.set_yscale("log")
    figure.suptitle(f"{section.title}: per-task cost", fontsize=11)
    figure.tight_layout()
    path = out_dir / f"cost_{slug(section)}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_accuracy(section: Section, out_dir: Path) -> Path:
    """Draw accuracy per category per system as grouped bars; return the PNG path."""
    plt = _pyplot()
    rows = section.categories + section.summary_rows[:1]
    width = 0.8 / max(1, len(section.systems))
    figure, axis = plt.subplots(
        figsize=(max(6.0, 0.9 * len(rows) * max(1, len(section.systems)) / 2 + 4), 4.2)
    )
    for offset, system in enumerate(section.systems):
        heights = [section.accuracy.get(row, {}).get(system) or 0.0 for row in rows]
        positions = [
            i + (offset - (len(section.systems) - 1) / 2) * width for i in range(len(rows))
        ]
        axis.bar(positions, heights, width=width, label=system)
    axis.set_xticks(
        range(len(rows)), [r.replace("_", " ") for r in rows], rotation=30, ha="right", fontsize=8
    )
    axis.set_ylabel(f"{section.metric} (%)")
    axis.set_ylim(0, 100)
    axis.set_title(f"{section.title}: {section.metric} per category")
    axis.legend(fontsize=8)
    figure.tight_layout()
    path = out_dir / f"accuracy_{slug(section)}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
