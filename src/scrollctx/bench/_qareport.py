"""``write_report``: result files in, a Markdown report with tables, PNG plots and raw JSON out.

The output folder receives:

- ``report.md``: per section (benchmark and size) an accuracy table (categories as rows,
  systems as columns, percentages with the question count), the status of every system's
  records, a cost table (tokens in/out, turns, wall time and corpus share per task), and the
  plots below, linked by relative path;
- ``accuracy_<section>.png`` and ``cost_<section>.png`` (see :mod:`scrollctx.bench._plots`);
- ``results.json``: every record the tables were computed from (the latest per system and
  question), and ``summary.json``: the tables as data.

Invariants: the report is a function of the records (no clock, no environment) except the
``generated`` line; nothing in the result files is modified.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.bench._plots import plot_accuracy, plot_cost
from scrollctx.bench._results import latest_records, read_records
from scrollctx.bench._tables import COST_FIELDS, Section, build_sections
from scrollctx.errors import UsageError

__all__ = ["ReportFiles", "render_qa_markdown", "write_report"]

_COST_LABELS = {
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "turns": "turns",
    "wall_time_s": "wall s",
    "corpus_share": "corpus share",
}


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    markdown: Path
    results_json: Path
    summary_json: Path
    plots: tuple[Path, ...]
    sections: tuple[Section, ...]


def write_report(
    result_paths: Sequence[Path], out_dir: Path, *, generated: str = ""
) -> ReportFiles:
    """Read result files, compute the tables and write the report folder."""
    if not result_paths:
        raise UsageError("no result files given; pass one or more results.jsonl files")
    records: list[dict[str, Any]] = []
    for path in result_paths:
        records.extend(read_records(Path(path)))
    records = latest_records(records)
    if not records:
        raise UsageError(
            f"the result files hold no records ({', '.join(map(str, result_paths))}); "
            "run scroll bench run first"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = build_sections(records)
    plots: list[Path] = []
    for section in sections:
        plots += [plot_accuracy(section, out_dir), plot_cost(section, out_dir)]
    markdown = out_dir / "report.md"
    sources = [str(p) for p in result_paths]
    markdown.write_text(render_qa_markdown(sections, sources, generated), encoding="utf-8")
    results_json = out_dir / "results.json"
    results_json.write_text(json.dumps(records, indent=1, ensure_ascii=False, default=str))
    summary_json = out_dir / "summary.json"
    summary = {"sources": sources, "sections": [s.to_dict() for s in sections]}
    summary_json.write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    return ReportFiles(markdown, results_json, summary_json, tuple(plots), tuple(sections))


def _cell(value: float | None, count: int | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} ({count})" if count is not None else f"{value:.1f}"


def _number(value: float | None, name: str) -> str:
    if value is None:
        return "–"
    if name == "corpus_share":
        return f"{100 * value:.2f}%"
    if name == "wall_time_s":
        return f"{value:.1f}"
    return f"{value:,.0f}"


def _accuracy_table(section: Section) -> list[str]:
    head = ["category", *section.systems]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in section.categories + section.summary_rows:
        label = f"**{row}**" if row in section.summary_rows else row
        cells = [
            _cell(section.accuracy.get(row, {}).get(s), section.counts.get(row, {}).get(s))
            for s in section.systems
        ]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return lines


def _status_table(section: Section) -> list[str]:
    lines = [
        "| system | scored | of which no answer (scored 0) | unscored (primary judge reply "
        "unreadable) | with an unreadable judge reply (that score left out) | judge said "
        "neither yes nor no (counted wrong) | error (runs again) |",
        "|---|---|---|---|---|---|---|",
    ]
    for system in section.systems:
        counts = section.status.get(system, {})
        cells = ("scored", "no_answer", "unscored", "malformed", "unreadable", "error")
        lines.append(f"| {system} | " + " | ".join(str(counts.get(c, 0)) for c in cells) + " |")
    return lines


def _cost_table(section: Section) -> list[str]:
    head = ["system", "tasks"]
    for name in COST_FIELDS:
        head += [f"{_COST_LABELS[name]} median", f"{_COST_LABELS[name]} mean"]
    head += ["tokens in total", "tokens out total"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in section.cost:
        cells = [row.system, str(row.tasks)]
        for name in COST_FIELDS:
            cells += [_number(row.median[name], name), _number(row.mean[name], name)]
        cells += [
            _number(row.total["tokens_in"], "tokens_in"),
            _number(row.total["tokens_out"], "tokens_out"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_qa_markdown(sections: Sequence[Section], sources: Sequence[str], generated: str) -> str:
    """Render the report's Markdown for ``sections`` (plots are linked, not embedded)."""
    from scrollctx.bench._plots import slug

    out = ["# Scroll benchmark report", ""]
    if generated:
        out += [f"Generated {generated}.", ""]
    out += ["Result files: " + ", ".join(f"`{s}`" for s in sources), ""]
    out += [
        "Scores are percentages; the number of scored questions behind each cell is in "
        "parentheses. Corpus share = input tokens of the task / tokens of the history it was "
        "asked over.",
        "",
    ]
    for section in sections:
        name = slug(section)
        out += [f"## {section.title}", "", f"### Accuracy ({section.metric})", ""]
        out += _accuracy_table(section)
        out += ["", f"![accuracy per category](accuracy_{name}.png)", "", "### Records", ""]
        out += _status_table(section)
        out += ["", "### Cost per task", ""]
        out += _cost_table(section)
        out += ["", f"![per-task cost](cost_{name}.png)", ""]
    return "\n".join(out)
