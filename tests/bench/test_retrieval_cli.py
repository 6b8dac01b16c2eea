"""``scroll bench retrieval`` end to end: real ingest, real stores, every system in one run.

Slices of the shared data run the lexical systems only (embedding a BEAM chat takes minutes on
two cores); the hand-made conversation runs every system, the semantic ones included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.bench import (
    LEVELS,
    RetrievalReport,
    SectionResult,
    evaluate_retrieval,
    load_locomo,
    locomo_conversations,
    metric_names,
    render_markdown,
    render_text,
)
from scrollctx.bench._labels import LocomoConversation, normalize_dia_id
from scrollctx.bench._retrieval import _check_same_rows, read_turns
from scrollctx.cli import run
from scrollctx.cli._bench import GENERATED
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Encoder, open_surface

LEXICAL = ["ms.search bm25", "rank_bm25", "bm25s"]

BIN = Path(sys.executable).parent


def _run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, object]:
    code = run(["bench", "retrieval", *args, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.err == ""  # progress only on a TTY
    return json.loads(captured.out)


def _check_section(section: dict[str, object], systems: list[str] = LEXICAL) -> None:
    metrics = section["metrics"]
    assert isinstance(metrics, dict)
    assert list(metrics) == systems
    for system in systems:
        assert set(metrics[system]) == set(LEVELS)
        for level in LEVELS:
            values = metrics[system][level]
            assert list(values) == metric_names()
            assert all(0.0 <= v <= 1.0 for v in values.values())
    assert section["unmapped_hits"] == dict.fromkeys(systems, 0)
    assert section["gold_missing"] == 0
    assert section["partial_results"] == 0
    assert 0.0 < section["recall_all@5_ceiling"] <= 1.0  # type: ignore[operator]


def _by_hand(work: Path, samples: list[LocomoConversation]) -> dict[str, float]:
    """``ms.search bm25``'s turn-level recall_any@1/@10 and MRR over ``samples``, recomputed
    from the run's own stores: each question searched again, each hit mapped to its
    ``dia_id`` here, each metric counted from its definition."""
    found_first, found_in_ten, reciprocal = [], [], []
    for sample in samples:
        store = work / sample.sample_id / "history.db"
        assert store.is_file(), store
        with open_surface(store, task_id=_only_task(store)) as ms:
            for probe in sample.probes:
                ranked: list[str] = []
                for hit in ms.search(probe.question, k=10, scope="task", mode="bm25"):
                    turn = normalize_dia_id(hit["metadata"]["dia_id"]) or f"seq:{hit['seq']}"
                    ranked += [] if turn in ranked else [turn]
                ranks = [r for r, turn in enumerate(ranked, 1) if turn in probe.gold]
                found_first.append(1.0 if ranks and ranks[0] == 1 else 0.0)
                found_in_ten.append(1.0 if ranks else 0.0)
                reciprocal.append(1 / ranks[0] if ranks else 0.0)
    n = len(found_first)
    return {
        "recall_any@1": sum(found_first) / n,
        "recall_any@10": sum(found_in_ten) / n,
        "mrr": sum(reciprocal) / n,
    }


def _only_task(store: Path) -> str:
    with EventLog.open(store) as log:
        [[task]] = log.execute(
            "SELECT DISTINCT task_id FROM conversation_history WHERE kind = 'conversation'"
        )
    return str(task)


def test_locomo_slice(
    capsys: pytest.CaptureFixture[str], shared_data: Path, tmp_path: Path
) -> None:
    args = ["--benchmark", "locomo", "--limit", "2", "--split", "all", "--lexical-only"]
    work = tmp_path / "work"
    report = _run_json(capsys, [*args, "--data", str(shared_data), "--work", str(work)])
    [section] = report["sections"]  # type: ignore[misc]
    first_two = load_locomo(shared_data / "locomo" / "locomo10.json")[:2]
    # Depth 10 sees every rank MRR can give (1/10 or more); rows further down add under 1/11.
    expected = _by_hand(work, first_two)
    reported = section["metrics"]["ms.search bm25"]["turn"]  # type: ignore[index]
    for metric in ("recall_any@1", "recall_any@10", "mrr"):
        assert reported[metric] == pytest.approx(expected[metric]), metric
    assert 0.0 < expected["recall_any@1"] < expected["recall_any@10"] < 1.0
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
    target.parent.mkdir()
    target.write_text(f"# Hand-written\n\nnotes\n{GENERATED}\nold tables\n", encoding="utf-8")
    args = ["--benchmark", "beam", "--beam-sizes", "100K", "--limit", "1", "--lexical-only"]
    code = run(["bench", "retrieval", *args, "--data", str(shared_data), "--write", str(target)])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("beam/100K [test]  (n = ")
    assert lines[1].split() == ["level", "metric", "ms.search", "bm25", "rank_bm25", "bm25s"]
    rows = [line.split() for line in lines if line.startswith(("  turn", "  session"))]
    assert len(rows) == 2 * len(metric_names())
    assert all(0.0 <= float(v) <= 1.0 for row in rows for v in row[2:])
    assert sum(line.startswith("  ms.search bm25 - ") for line in lines) == 2
    assert lines[-1] == "split test; depth 10"
    text = target.read_text(encoding="utf-8")
    command = "--benchmark beam --beam-sizes 100K --split test --limit 1 --lexical-only --write"
    assert f"`scroll bench retrieval {command} {target}`" in text
    assert "| level | metric | ms.search bm25 | rank_bm25 | bm25s |" in text
    assert "chats 1-7" in text and "Split: **test**" in text
    assert lines[0].split("(")[1].split(";")[0] in text  # the same n
    assert text.startswith(f"# Hand-written\n\nnotes\n{GENERATED}\n\n# Retrieval")
    assert "old tables" not in text  # the part below the marker is regenerated


def test_the_split_picks_conversations_by_name(
    capsys: pytest.CaptureFixture[str], shared_data: Path
) -> None:
    base = ["--benchmark", "beam", "--beam-sizes", "100K", "--limit", "1", "--lexical-only"]
    dev = _run_json(capsys, [*base, "--split", "dev", "--data", str(shared_data)])
    test = _run_json(capsys, [*base, "--data", str(shared_data)])
    assert dev["split"] == "dev" and test["split"] == "test"
    # chat 1 is development, chat 8 the first test chat: different corpora, different n
    assert dev["sections"][0]["turns"] != test["sections"][0]["turns"]  # type: ignore[index]


def test_pipeline_scores_an_obvious_question_as_found(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
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
    conversations = locomo_conversations(source, split)
    report = evaluate_retrieval(
        conversations, split="all", encoder=semantic_encoder, work_dir=tmp_path / "work"
    )
    [section] = report.sections
    assert section.n == 2 and section.turns == 6
    assert report.systems[0] == "ms.search" and len(report.systems) == 7
    for system in report.systems:
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
    args = ["bench", "retrieval", "--benchmark", "locomo", "--limit", "1", "--lexical-only"]
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
    command += ["--lexical-only", "--data", str(shared_data), "--json"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    sections = json.loads(out.stdout)["sections"]
    assert [s["name"] for s in sections] == ["locomo", "beam/100K", "beam/500K"]
    for section in sections:
        assert section["conversations"] == 1 and section["n"] > 0
        _check_section(section)


# -- the rows every system ranks ---------------------------------------------------------------


def test_a_store_whose_searchable_rows_differ_from_the_turns_is_refused(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "history.db") as log:
        log.append(NewEvent(session_id="s", task_id="t", kind="conversation", content="hello"))
        turns = read_turns(log, "dia_id")
        _check_same_rows(log, turns, "t", None)  # the same rows: fine
        log.append(NewEvent(session_id="s", task_id="t", kind="system", content="extra"))
        with pytest.raises(RuntimeError, match="would rank different rows"):
            _check_same_rows(log, turns, "t", None)


# -- the targets line, from the numbers of the run ------------------------------------------------


def _report(ours: dict[str, float], theirs: dict[str, float]) -> RetrievalReport:
    report = RetrievalReport(ks=(1, 5, 10), depth=10, semantic=False)
    section = SectionResult(name="demo", systems=report.systems, groups=["g", "g"])
    section.clusters = ["c1", "c2"]
    section.gold_sizes = [1, 7]
    for system in report.systems:
        scores = ours if system == report.ours else theirs
        section.rows[system] = {level: [dict(scores), dict(scores)] for level in LEVELS}
    report.sections.append(section)
    return report


def test_targets_met_are_stated_in_text_and_markdown() -> None:
    report = _report(dict.fromkeys(metric_names(), 1.0), dict.fromkeys(metric_names(), 0.0))
    verdict = "ms.search bm25 at or above the best baseline on every turn-level metric: yes"
    assert f"  target: {verdict}" in render_text(report).splitlines()
    markdown = render_markdown(report, command="scroll bench retrieval", date="today")
    assert "## Against the targets" in markdown and f"- demo: {verdict}." in markdown
    assert "recall_all@5 ceiling 0.500" in markdown
    assert "| rank_bm25 | +1.000 [+1.000, +1.000]" in markdown


def test_targets_missed_name_every_metric_behind_with_its_interval() -> None:
    ours = dict.fromkeys(metric_names(), 0.5) | {"mrr": 0.25, "recall_all@1": 0.4}
    report = _report(ours, dict.fromkeys(metric_names(), 0.5))
    assert (
        "  target: ms.search bm25 at or above the best baseline on every turn-level metric: "
        "no, behind on recall_all@1 -0.100 vs rank_bm25 [-0.100, -0.100]; "
        "mrr -0.250 vs rank_bm25 [-0.250, -0.250]"
    ) in render_text(report).splitlines()
