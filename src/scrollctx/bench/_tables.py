"""Aggregate result records into the tables of a report (pure; no plotting, no files).

Records are grouped into sections by (benchmark, size); inside a section, systems keep the
order in which they first appear. For each system:

- accuracy per category on the benchmark's primary score
  (:data:`~scrollctx.bench._scoring.PRIMARY`), as a percentage. BEAM follows its official
  aggregation: the mean over each conversation's questions of one ability, then the mean over
  conversations. Summary rows: BEAM ``average`` (the mean of the ability scores, as the
  paper's "average"); LongMemEval ``task-averaged`` (the mean of the type accuracies),
  ``overall`` and ``abstention``; LoCoMo ``overall`` (the mean over every question) and, when
  a J judge ran, ``J (1-4)``;
- cost: tokens in and out per task, turns, wall time and the share of the corpus that entered
  the model's view, as median / mean / total.

Only the latest record of each (system, qid) counts. A score enters a mean when the record
holds it: a judge reply that could not be read leaves out its own score only (an unreadable J
keeps the record's F1), and is counted in ``status[system]["malformed"]``; LongMemEval replies
counted wrong because they said neither yes nor no are counted in ``"unreadable"``. ``error``
records are left out of every mean.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scrollctx.bench._questions import categories_of
from scrollctx.bench._results import latest_records
from scrollctx.bench._scoring import PRIMARY
from scrollctx.errors import UsageError

__all__ = ["COST_FIELDS", "CostRow", "Section", "build_sections"]

COST_FIELDS: tuple[str, ...] = ("tokens_in", "tokens_out", "turns", "wall_time_s", "corpus_share")


@dataclass(frozen=True, slots=True)
class CostRow:
    """Cost of one system in one section: per-field median, mean and total over its tasks."""

    system: str
    tasks: int
    median: dict[str, float | None]
    mean: dict[str, float | None]
    total: dict[str, float]


@dataclass(slots=True)
class Section:
    """The tables of one (benchmark, size)."""

    benchmark: str
    size: str | None
    metric: str
    systems: list[str]
    categories: list[str]
    accuracy: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """``accuracy[row][system]`` in percent; rows are categories then summary rows."""
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    """``counts[row][system]``: how many scored questions a cell averages."""
    summary_rows: list[str] = field(default_factory=list)
    status: dict[str, dict[str, int]] = field(default_factory=dict)
    """``status[system]``: records per status (scored, unscored, error); ``no_answer``: scored
    runs that ended without an answer (step limit, overflow), scored 0; ``malformed``: records
    with a judge reply that could not be read; ``unreadable``: records with a judge reply
    counted wrong because it said neither yes nor no."""
    cost: list[CostRow] = field(default_factory=list)
    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """``values[field][system]``: per-task values for the box plots."""

    @property
    def title(self) -> str:
        """``BEAM 100K``, ``LoCoMo``, ``LongMemEval S``."""
        names = {"beam": "BEAM", "locomo": "LoCoMo", "longmemeval": "LongMemEval"}
        name = names.get(self.benchmark, self.benchmark)
        return f"{name} {self.size}" if self.size else name

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form for ``summary.json``."""
        return {
            "benchmark": self.benchmark,
            "size": self.size,
            "metric": self.metric,
            "systems": self.systems,
            "categories": self.categories,
            "summary_rows": self.summary_rows,
            "accuracy": self.accuracy,
            "counts": self.counts,
            "status": self.status,
            "cost": [
                {
                    "system": c.system,
                    "tasks": c.tasks,
                    "median": c.median,
                    "mean": c.mean,
                    "total": c.total,
                }
                for c in self.cost
            ],
        }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _percent(value: float | None) -> float | None:
    return None if value is None else round(100.0 * value, 2)


def build_sections(records: Iterable[dict[str, Any]]) -> list[Section]:
    """Group the latest records into sections and compute every table."""
    grouped: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for record in latest_records(records):
        key = (str(record.get("benchmark", "?")), record.get("size"))
        grouped.setdefault(key, []).append(record)
    return [_section(benchmark, size, rows) for (benchmark, size), rows in grouped.items()]


def _section(benchmark: str, size: str | None, rows: list[dict[str, Any]]) -> Section:
    systems = list(dict.fromkeys(str(r["system"]) for r in rows))
    present = {str(r.get("category")) for r in rows}
    try:
        order = [c for c in categories_of(benchmark) if c in present]
    except UsageError:
        order = []
    order += sorted(present - set(order) - {"abstention"})
    metric = PRIMARY.get(benchmark, "score")
    section = Section(benchmark, size, metric, systems, order)
    for system in systems:
        mine = [r for r in rows if r["system"] == system]
        _fill_accuracy(section, system, mine)
        section.status[system] = _status_counts(mine)
        section.cost.append(_cost_row(system, mine))
        for name in COST_FIELDS:  # a question that ended in error cost nothing worth plotting
            values = [
                float(r[name]) for r in _finished(mine) if isinstance(r.get(name), int | float)
            ]
            section.values.setdefault(name, {})[system] = values
    return section


def _status_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        status = str(row.get("status", "?"))
        counts[status] = counts.get(status, 0) + 1
        if row.get("run_status") == "failed" and status != "error":
            counts["no_answer"] = counts.get("no_answer", 0) + 1
        for flag in ("malformed", "unreadable"):
            if row.get(flag):
                counts[flag] = counts.get(flag, 0) + 1
    return counts


def _score(row: dict[str, Any], metric: str) -> float | None:
    value = (row.get("scores") or {}).get(metric)
    if not isinstance(value, int | float) or row.get("status") == "error":
        return None
    return float(value)


def _set(section: Section, row: str, system: str, value: float | None, count: int) -> None:
    section.accuracy.setdefault(row, {})[system] = _percent(value)
    section.counts.setdefault(row, {})[system] = count
    if row not in section.categories and row not in section.summary_rows:
        section.summary_rows.append(row)


def _fill_accuracy(section: Section, system: str, rows: list[dict[str, Any]]) -> None:
    metric = section.metric
    per_category: dict[str, float | None] = {}
    for category in section.categories:
        scored = [
            r for r in rows if str(r.get("category")) == category and _score(r, metric) is not None
        ]
        if section.benchmark == "beam":
            value = _conversation_mean(scored, metric)
        else:
            value = _mean([s for r in scored if (s := _score(r, metric)) is not None])
        per_category[category] = value
        _set(section, category, system, value, len(scored))
    _fill_summary(section, system, rows, per_category)


def _conversation_mean(rows: list[dict[str, Any]], metric: str) -> float | None:
    by_history: dict[str, list[float]] = {}
    for row in rows:
        score = _score(row, metric)
        if score is not None:
            by_history.setdefault(str(row.get("history")), []).append(score)
    return _mean([m for values in by_history.values() if (m := _mean(values)) is not None])


def _fill_summary(
    section: Section, system: str, rows: list[dict[str, Any]], per_category: dict[str, float | None]
) -> None:
    metric = section.metric
    category_means = [v for v in per_category.values() if v is not None]
    all_scores = [s for r in rows if (s := _score(r, metric)) is not None]
    if section.benchmark == "beam":
        _set(section, "average", system, _mean(category_means), len(all_scores))
    elif section.benchmark == "longmemeval":
        _set(section, "task-averaged", system, _mean(category_means), len(all_scores))
        _set(section, "overall", system, _mean(all_scores), len(all_scores))
        abstention = [
            s
            for r in rows
            if "_abs" in str(r.get("qid", "")) and (s := _score(r, metric)) is not None
        ]
        _set(section, "abstention", system, _mean(abstention), len(abstention))
    else:
        _set(section, "overall", system, _mean(all_scores), len(all_scores))
        judged = [s for r in rows if (s := _score(r, "j")) is not None]
        if judged:
            _set(section, "J (1-4)", system, _mean(judged), len(judged))


def _finished(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of questions that ran (an ``error`` record's costs are not a task's)."""
    return [r for r in rows if r.get("status") != "error"]


def _cost_row(system: str, rows: list[dict[str, Any]]) -> CostRow:
    median: dict[str, float | None] = {}
    mean: dict[str, float | None] = {}
    total: dict[str, float] = {}
    finished = _finished(rows)
    for name in COST_FIELDS:
        values = [float(r[name]) for r in finished if isinstance(r.get(name), int | float)]
        median[name] = statistics.median(values) if values else None
        mean[name] = _mean(values)
        total[name] = float(sum(values))
    return CostRow(system, len(finished), median, mean, total)
