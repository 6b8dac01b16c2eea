"""Damaged and growing transcript files: per-line reports, earlier events kept, nothing doubled."""

from __future__ import annotations

import json
from pathlib import Path

from transcript_helpers import raw_records

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

CLAUDE = "claude-code/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
CODEX = "codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_unknown_record_bad_bytes_and_a_cut_line_are_reported_by_line(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    lines = _lines(transcripts / CLAUDE)
    good = raw_records(transcripts / CLAUDE)
    unknown = json.dumps({"type": "teleport", "uuid": "u-1", "sessionId": good[1]["sessionId"]})
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(
        b"".join(lines[:40])
        + unknown.encode() + b"\n"
        + b'{"type": "user", "text": "caf\xe9"}\n'
        + b"".join(lines[40:60])
        + lines[60][: len(lines[60]) // 2]
    )  # fmt: skip
    report = ingest_path(event_log, damaged)
    assert report.records_skipped == {"teleport": 1, "unreadable line": 2}
    assert len(report.problems) == 3
    assert report.problems[0].startswith(f"{damaged}:41: teleport: unknown Claude Code record type")
    assert report.problems[1].startswith(f"{damaged}:42: unreadable line: is not UTF-8")
    assert report.problems[2].startswith(f"{damaged}:63: unreadable line: line 63 has no newline")
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"".join(lines[:60]))
    with EventLog.open(tmp_path / "reference" / "history.db") as reference:
        expected = ingest_path(reference, whole).events_added
    assert report.events_added == expected  # every good line, before and after the bad ones
    # The writer finishes the cut line: only its events are added.
    damaged.write_bytes(damaged.read_bytes() + lines[60][len(lines[60]) // 2 :])
    again = ingest_path(event_log, damaged)
    assert again.events_skipped == expected and again.events_added >= 1
    assert all("has no newline" not in p for p in again.problems)


def test_a_growing_file_adds_only_its_new_records(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    expected: set[tuple[str, str, str]] = set()
    for name in (CLAUDE, CODEX):
        lines = _lines(transcripts / name)
        with EventLog.open(tmp_path / name.replace("/", "_") / "history.db") as fresh:
            whole = ingest_path(fresh, transcripts / name)
            expected |= _shape(fresh)
        growing = tmp_path / Path(name).name
        added = 0
        for cut in (len(lines) // 3, len(lines) // 2 + 1, len(lines)):
            growing.write_bytes(b"".join(lines[:cut]))
            report = ingest_path(event_log, growing)
            added += report.events_added
            assert report.events_skipped <= added  # what was there is found, not added again
        assert added == whole.events_added
    assert _shape(event_log) == expected  # same keys, kinds and roles as one whole import


def _shape(log: EventLog) -> set[tuple[str, str, str]]:
    rows = log.execute("SELECT dedup_key, kind, role FROM conversation_history")
    return {(r[0], r[1], r[2]) for r in rows}


def test_a_line_nested_too_deeply_is_an_unreadable_line(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    lines = _lines(transcripts / CLAUDE)
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b"".join(lines[:40]) + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    report = ingest_path(event_log, deep)
    assert report.records_skipped == {"unreadable line": 1}
    assert report.problems == [
        f"{deep}:41: unreadable line: is not valid JSON (nested too deeply to parse, column 1)"
    ]
    assert report.events_added > 0
