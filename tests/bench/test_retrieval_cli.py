"""``scroll bench retrieval`` end to end: real ingest, real stores, both systems in one run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.bench import (
    LEVELS,
    SYSTEMS,
    RetrievalReport,
    SectionResult,
    evaluate_retrieval,
    load_locomo,
    locomo_conversations,
    metric_names,
    render_markdown,
    render_text,
)
from scrollctx.cli import run

BIN = Path(sys.executable).parent


def _run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, object]:
    code = run(["bench", "retrieval", *args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""  # progress only on a TTY
    return json.loads(captured.out)


def _check_section(section: dict[str, object]) -> None:
    metrics = section["metrics"]
    assert isinstance(metrics, dict)
    assert set(metrics) == set(SYSTEMS)
    for system in SYSTEMS:
        assert set(metrics[system]) == set(LEVELS)
        for level in LEVELS:
            values = metrics[system][level]
            assert list(values) == metric_names()
            assert all(0.0 <= v <= 1.0 for v in values.values())
    assert section["unmapped_hits"] == {"ms.search": 0, "BM25": 0}
    assert section["gold_missing"] == 0
    assert section["partial_results"] == 0
    for wins, losses, ties in section["paired_turn"].values():
        assert wins + losses + ties == section["n"]


def test_locomo_slice(capsys: pytest.CaptureFixture[str], shared_data: Path) -> None:
    report = _run_json(
        capsys, ["--benchmark", "locomo", "--limit", "2", "--data", str(shared_data)]
    )
    [section] = report["sections"]  # type: ignore[misc]
    first_two = load_locomo(shared_data / "locomo" / "locomo10.json")[:2]
    assert section["name"] == "locomo"
    assert section["conversations"] == 2
    assert section["n"] == sum(len(c.probes) for c in first_two)
    assert section["questions"] == sum(c.counts.total for c in first_two)
    assert section["turns"] == sum(len(c.turn_ids) for c in first_two)
    assert set(section["by_group"]) <= {"1", "2", "3", "4"}
    _check_section(section)


def test_beam_slice_and_markdown(
    capsys: pytest.CaptureFixture[str], shared_data: Path, tmp_path: Path
) -> None:
    target = tmp_path / "docs" / "retrieval.md"
    args = ["--benchmark", "beam", "--beam-sizes", "100K", "--limit", "1"]
    args += ["--bm25-tokens", "words"]
    code = run(["bench", "retrieval", *args, "--data", str(shared_data), "--write", str(target)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("beam/100K  (n = ")
    assert lines[1].split() == ["level", "metric", "ms.search", "BM25", "delta"]
    rows = [
        line.split()
        for line in lines[2:]
        if line.startswith("  turn") or line.startswith("  session")
    ]
    assert len(rows) == 2 * len(metric_names())
    for _level, _metric, ours, theirs, delta in rows:
        assert 0.0 <= float(ours) <= 1.0 and 0.0 <= float(theirs) <= 1.0
        assert float(delta) == pytest.approx(float(ours) - float(theirs), abs=0.0015)
    text = target.read_text(encoding="utf-8")
    command = "--benchmark beam --beam-sizes 100K --limit 1 --bm25-tokens words --write"
    assert f"`scroll bench retrieval {command} {target}`" in text
    assert "tokens lower-cased runs of letters and digits" in text
    assert lines[-1] == "BM25 tokens: lower-cased runs of letters and digits; depth 10"
    assert "| level | metric | ms.search | BM25 | delta |" in text
    assert lines[0].split("(")[1].split(";")[0] in text  # the same n


def test_pipeline_scores_an_obvious_question_as_found(tmp_path: Path) -> None:
    turns = [
        ("D1:1", "A", "I adopted a puppy last week, his name is Biscuit."),
        ("D1:2", "B", "That is lovely, congratulations."),
        ("D1:3", "A", "We walk to the river every morning."),
        ("D2:1", "B", "My sister moved to Lisbon for her new job."),
        ("D2:2", "A", "Lisbon is sunny, she will love the light there."),
        ("D2:3", "B", "She starts at a bakery on Monday."),
    ]
    sessions: dict[str, object] = {"speaker_a": "A", "speaker_b": "B"}
    for dia_id, speaker, text in turns:
        number = dia_id[1]
        sessions.setdefault(f"session_{number}", []).append(  # type: ignore[union-attr]
            {"speaker": speaker, "dia_id": dia_id, "text": text}
        )
        sessions[f"session_{number}_date_time"] = f"1:56 pm on {number} May, 2023"
    sample = {
        "sample_id": "conv-t",
        "conversation": sessions,
        "qa": [
            {
                "question": "Which city did the sister move to?",
                "answer": "Lisbon",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "What is the puppy called?",
                "answer": "Biscuit",
                "evidence": ["D1:01"],
                "category": 4,
            },
        ],
    }
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps([sample]), encoding="utf-8")
    split = tmp_path / "split"
    split.mkdir()
    report = evaluate_retrieval(locomo_conversations(source, split), work_dir=tmp_path / "work")
    [section] = report.sections
    assert section.n == 2 and section.turns == 6
    for system in SYSTEMS:
        turn = section.means(system, "turn")
        assert turn["recall_any@10"] == 1.0, system
        assert turn["recall_any@1"] > 0.0, system
        assert section.means(system, "session")["recall_any@1"] > 0.0, system


def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], shared_data: Path, tmp_path: Path
) -> None:
    code = run(
        [
            "bench",
            "retrieval",
            "--benchmark",
            "beam",
            "--beam-sizes",
            "2M",
            "--data",
            str(shared_data),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "unknown BEAM size '2M'" in err and len(err.strip().splitlines()) == 1
    code = run(["bench", "retrieval", "--data", str(tmp_path / "missing"), "--json"])
    err = capsys.readouterr().err
    assert code == 2
    assert json.loads(err)["error"]["type"] == "UsageError"


def test_reused_work_folder_is_refused_and_left_intact(
    capsys: pytest.CaptureFixture[str], shared_data: Path, tmp_path: Path
) -> None:
    args = ["bench", "retrieval", "--benchmark", "locomo", "--limit", "1"]
    args += ["--data", str(shared_data), "--work", str(tmp_path / "work")]
    assert run(args) == 0
    capsys.readouterr()
    [db] = (tmp_path / "work").glob("*/history.db")
    before = db.read_bytes()
    assert run(args) == 2
    err = capsys.readouterr().err
    assert "already exists; use an empty --work folder" in err
    assert db.read_bytes() == before


def test_console_script_runs_every_section(shared_data: Path) -> None:
    command = [str(BIN / "scroll"), "bench", "retrieval", "--benchmark", "all", "--limit", "1"]
    command += ["--data", str(shared_data), "--json"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    sections = json.loads(out.stdout)["sections"]
    assert [s["name"] for s in sections] == ["locomo", "beam/100K", "beam/500K"]
    for section in sections:
        assert section["conversations"] == 1 and section["n"] > 0
        _check_section(section)


# -- the targets line, from the numbers of the run ------------------------------------------------


def _report(ours: dict[str, float], theirs: dict[str, float]) -> RetrievalReport:
    section = SectionResult(name="demo", groups=["g"])
    for system, scores in zip(SYSTEMS, (ours, theirs), strict=True):
        section.rows[system] = {level: [dict(scores)] for level in LEVELS}
    return RetrievalReport(ks=(1, 5, 10), depth=10, sections=[section])


def test_targets_met_are_stated_in_text_and_markdown() -> None:
    report = _report(dict.fromkeys(metric_names(), 1.0), dict.fromkeys(metric_names(), 0.0))
    verdict = (
        "ms.search at least matches BM25 on every metric: yes; "
        "beats it on turn recall_all@5: yes (+1.000)"
    )
    assert f"  target: {verdict}" in render_text(report).splitlines()
    markdown = render_markdown(report, command="scroll bench retrieval", date="today")
    assert "## Against the targets" in markdown and f"- demo: {verdict}." in markdown


def test_targets_missed_name_every_metric_behind() -> None:
    ours = dict.fromkeys(metric_names(), 0.5) | {"mrr": 0.25}
    report = _report(ours, dict.fromkeys(metric_names(), 0.5))
    assert (
        "  target: ms.search at least matches BM25 on every metric: no, behind on "
        "turn mrr -0.2500, session mrr -0.2500; beats it on turn recall_all@5: no (+0.000)"
    ) in render_text(report).splitlines()
