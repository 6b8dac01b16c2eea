"""A tree of mixed transcripts: each file's format found by content, one report per format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scrollctx.cli import run
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

FORMATS = {
    "claude-code": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini-cli",
    "chatgpt": "chatgpt-export",
    "aider": "aider",
}


def test_a_folder_of_every_format(event_log: EventLog, transcripts: Path, tmp_path: Path) -> None:
    tree = tmp_path / "history"
    for folder in FORMATS.values():  # the formats side by side, detected by content
        for source in (p for p in (transcripts / folder).rglob("*") if p.is_file()):
            target = tree / folder / source.relative_to(transcripts / folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    (tree / "README.md").write_text("# notes\n", encoding="utf-8")
    (tree / "empty.jsonl").write_text("", encoding="utf-8")
    report = ingest_path(event_log, tree)
    assert set(report.formats) == set(FORMATS)
    assert report.files_unrecognised == 2
    singles = {}
    for name, folder in FORMATS.items():
        with EventLog.open(tmp_path / f"{name}.store" / "history.db") as alone:
            singles[name] = ingest_path(alone, transcripts / folder)
    for name, share in report.formats.items():
        assert (share.files, share.sessions, share.events_added) == (
            singles[name].files, singles[name].sessions, singles[name].events_added,
        )  # fmt: skip
        assert share.records_skipped == singles[name].records_skipped
    assert report.events_added == sum(s.events_added for s in singles.values())


def test_cli_reports_skips_on_stdout_and_problems_on_stderr(
    store_dir: Path, transcripts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damaged = tmp_path / "rollout.jsonl"
    source = (
        transcripts
        / "codex"
        / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    )
    damaged.write_bytes(source.read_bytes() + b'{"type": "mystery", "payload": {}}\n')
    assert run(["ingest", "--store", str(store_dir), str(damaged)]) == 0
    out, err = capsys.readouterr()
    assert "records skipped: event_msg/agent_reasoning 39" in out and "mystery 1" in out
    assert f"warning: {damaged}:" in err and "unknown Codex record type 'mystery'" in err
