"""Result files (durable, resumable, torn tails) and the report: tables, Markdown, PNGs, JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scrollctx.bench._qareport import write_report
from scrollctx.bench._results import ResultFile, read_records
from scrollctx.bench._tables import build_sections
from scrollctx.errors import FormatError, UsageError


def _record(
    system: str, qid: str, category: str, score: float | None, **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "benchmark": "beam",
        "size": "100K",
        "system": system,
        "qid": qid,
        "history": qid.split("#")[0],
        "category": category,
        "status": "scored" if score is not None else "unscored",
        "scores": {} if score is None else {"judge": score},
        "tokens_in": 1000,
        "tokens_out": 100,
        "turns": 3,
        "wall_time_s": 2.0,
        "corpus_share": 0.01,
    }
    record.update(extra)
    return record


def test_result_file_appends_resumes_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    results = ResultFile(path)
    results.append(_record("scroll", "c1#a", "summarization", 1.0))
    results.append(_record("scroll", "c1#b", "summarization", None))
    results.append(_record("scroll", "c1#c", "summarization", 0.0, status="error"))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"system": "scroll", "qid": "c1#d", "sta')  # killed mid-write
    reopened = ResultFile(path)
    assert reopened.repaired > 0
    assert reopened.finished() == {("scroll", "c1#a"), ("scroll", "c1#b")}
    assert [r["qid"] for r in reopened.records()] == ["c1#a", "c1#b", "c1#c"]
    reopened.append(_record("scroll", "c1#c", "summarization", 1.0))
    assert ("scroll", "c1#c") in ResultFile(path).finished()
    assert path.read_text(encoding="utf-8").endswith("\n")


def test_a_corrupt_line_is_an_error_and_nothing_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    text = json.dumps(_record("scroll", "c1#a", "x", 1.0)) + "\nnot json\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match="line 2 is not JSON"):
        ResultFile(path)
    assert path.read_text(encoding="utf-8") == text
    with pytest.raises(FormatError, match="not found"):
        list(read_records(tmp_path / "missing.jsonl"))


def test_beam_tables_average_per_conversation_then_over_conversations() -> None:
    records = [
        # conversation c1: summarization 1.0 and 0.0 -> 0.5; conversation c2: 1.0 -> mean 0.75
        _record("scroll", "c1#s0", "summarization", 1.0),
        _record("scroll", "c1#s1", "summarization", 0.0),
        _record("scroll", "c2#s0", "summarization", 1.0),
        _record("scroll", "c1#k0", "knowledge_update", 0.5),
        _record("scroll", "c1#k1", "knowledge_update", None),
        _record("scroll", "c1#k2", "knowledge_update", 0.0, run_status="failed"),
        _record("summary", "c1#s0", "summarization", 0.0, tokens_in=10),
        _record("summary", "c1#s0", "summarization", 1.0, tokens_in=30),  # rerun: latest wins
    ]
    (section,) = build_sections(records)
    assert section.title == "BEAM 100K" and section.systems == ["scroll", "summary"]
    assert section.categories == ["knowledge_update", "summarization"]
    assert section.accuracy["summarization"] == {"scroll": 75.0, "summary": 100.0}
    assert section.accuracy["knowledge_update"]["scroll"] == 25.0  # mean of 0.5 and 0.0
    assert section.accuracy["average"]["scroll"] == pytest.approx(50.0)
    assert section.status["scroll"] == {"scored": 5, "unscored": 1, "no_answer": 1}
    cost = {row.system: row for row in section.cost}
    assert cost["summary"].median["tokens_in"] == 30
    assert cost["scroll"].total["tokens_in"] == 6000


def test_longmemeval_and_locomo_summary_rows() -> None:
    lme = [
        {**_record("scroll", "q1", "multi-session", 1.0), "benchmark": "longmemeval", "size": "S"},
        {
            **_record("scroll", "q2_abs", "multi-session", 0.0),
            "benchmark": "longmemeval",
            "size": "S",
        },
        {
            **_record("scroll", "q3", "temporal-reasoning", 1.0),
            "benchmark": "longmemeval",
            "size": "S",
        },
        {  # the judge said neither yes nor no: counted wrong, as the official scorer does
            **_record("scroll", "q4", "temporal-reasoning", 0.0),
            "benchmark": "longmemeval",
            "size": "S",
            "unreadable": {"judge": "the reply says neither yes nor no"},
        },
    ]
    locomo = [
        {
            **_record("scroll", "l1", "1", None),
            "benchmark": "locomo",
            "size": None,
            "status": "scored",
            "scores": {"f1": 0.5, "j": 1.0},
        },
        {
            **_record("scroll", "l2", "5", None),
            "benchmark": "locomo",
            "size": None,
            "status": "scored",
            "scores": {"f1": 1.0},
        },
    ]
    lme_section, locomo_section = build_sections(lme + locomo)
    assert lme_section.accuracy["multi-session"]["scroll"] == 50.0
    assert lme_section.accuracy["temporal-reasoning"]["scroll"] == 50.0
    assert lme_section.accuracy["task-averaged"]["scroll"] == 50.0
    assert lme_section.accuracy["overall"]["scroll"] == 50.0
    assert lme_section.status["scroll"]["unreadable"] == 1
    assert lme_section.accuracy["abstention"]["scroll"] == 0.0
    assert locomo_section.metric == "f1"
    assert locomo_section.accuracy["overall"]["scroll"] == 75.0
    assert locomo_section.accuracy["J (1-4)"]["scroll"] == 100.0


def test_report_writes_markdown_pngs_and_json(tmp_path: Path) -> None:
    first, second = tmp_path / "scroll.jsonl", tmp_path / "baseline.jsonl"
    scroll, baseline = ResultFile(first), ResultFile(second)
    for index, category in enumerate(["summarization", "event_ordering", "knowledge_update"]):
        scroll.append(_record("scroll", f"c1#{index}", category, 1.0, tokens_in=1000 + index))
        baseline.append(_record("longcontext", f"c1#{index}", category, 0.5, tokens_in=90_000))
    files = write_report([first, second], tmp_path / "report", generated="2026-11-29")
    markdown = files.markdown.read_text(encoding="utf-8")
    assert "| category | scroll | longcontext |" in markdown
    assert "| summarization | 100.0 (1) | 50.0 (1) |" in markdown
    assert "| **average** | 100.0 (3) | 50.0 (3) |" in markdown
    assert "| longcontext | 3 | 90,000 | 90,000 |" in markdown
    assert "![per-task cost](cost_beam_100K.png)" in markdown
    assert "| scroll | 3 | 0 | 0 | 0 |" in markdown
    for plot in files.plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 5000
    assert {p.name for p in files.plots} == {"accuracy_beam_100K.png", "cost_beam_100K.png"}
    assert len(json.loads(files.results_json.read_text())) == 6
    summary = json.loads(files.summary_json.read_text())
    assert summary["sections"][0]["accuracy"]["average"] == {"scroll": 100.0, "longcontext": 50.0}


def test_report_refuses_empty_input(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match="no records"):
        write_report([empty], tmp_path / "out")
    with pytest.raises(UsageError, match="no result files"):
        write_report([], tmp_path / "out")


def test_a_system_whose_questions_all_errored_plots_no_cost() -> None:
    # An error record (the model was never reached) carries zero costs: a box plot of them
    # drew a point at 0 for a system that ran no task.
    records = [_record("scroll", "c1#0", "summarization", 1.0)]
    records += [
        _record("summary", f"c1#{i}", "summarization", None, status="error", tokens_in=0,
                tokens_out=0, turns=0)
        for i in range(2)
    ]  # fmt: skip

    (section,) = build_sections(records)

    assert section.values["tokens_in"] == {"scroll": [1000.0], "summary": []}
    assert {row.system: row.tasks for row in section.cost} == {"scroll": 1, "summary": 0}
