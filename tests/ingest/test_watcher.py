"""``Watcher.sync`` in process: partial lines, rotation, deletion, restart, whole documents."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from scrollctx.ingest import Watcher, ingest_path
from scrollctx.log import EventLog

CLAUDE = "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
GEMINI = "gemini-cli/session-2025-12-01T21-45-5b959dae.json"


def _reference(tmp_path: Path, name: str, data: bytes) -> int:
    """Events a one-shot import of ``data`` gives, in a store of its own."""
    source = tmp_path / "reference" / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    with EventLog.open(tmp_path / "reference" / f"{name}.store" / "history.db") as log:
        return ingest_path(log, source).events_added


def test_lines_are_imported_once_complete(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    lines = (transcripts / CLAUDE).read_bytes().splitlines(keepends=True)
    folder = tmp_path / "projects" / "demo"
    folder.mkdir(parents=True)
    live = folder / "s.jsonl"
    watcher = Watcher(event_log, [tmp_path / "projects"])
    live.write_bytes(b"".join(lines[:10]) + lines[10][:40])
    first = watcher.sync()
    assert first.events_added == _reference(tmp_path, "ten", b"".join(lines[:10]))
    assert first.problems == []  # a partial last line is awaited, not reported
    with live.open("ab") as handle:
        handle.write(lines[10][40:] + b"".join(lines[11:30]))
    second = watcher.sync()
    assert first.events_added + second.events_added == _reference(
        tmp_path, "thirty", b"".join(lines[:30])
    )
    assert watcher.sync().events_added == 0  # nothing changed, nothing read


def test_rotation_deletion_and_restart_add_nothing_twice(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    lines = (transcripts / CLAUDE).read_bytes().splitlines(keepends=True)
    root = tmp_path / "projects"
    (root / "demo").mkdir(parents=True)
    live = root / "demo" / "s.jsonl"
    live.write_bytes(b"".join(lines[:20]))
    watcher = Watcher(event_log, [root])
    added = watcher.sync().events_added
    os.rename(live, root / "demo" / "s-1.jsonl")  # rotated: same inode, a new name
    live.write_bytes(b"".join(lines[20:]))  # the agent goes on in a new file
    added += watcher.sync().events_added
    assert added == _reference(tmp_path, "whole", b"".join(lines))
    (root / "demo" / "s-1.jsonl").unlink()
    assert watcher.sync().events_added == 0 and len(watcher.followed) == 1
    assert event_log.count() == added  # a deleted file's events stay
    live.write_bytes(b"".join(lines))  # replaced by the whole transcript: same records
    assert watcher.sync().events_added == 0
    restarted = Watcher(event_log, [root]).sync()
    assert restarted.events_added == 0 and restarted.events_skipped == _events_of(event_log, live)


@pytest.mark.parametrize("odd", ["fifo", "symlink loop"])
def test_a_path_that_is_no_regular_file_is_never_opened(
    event_log: EventLog, transcripts: Path, tmp_path: Path, odd: str
) -> None:
    data = (transcripts / CLAUDE).read_bytes()
    root = tmp_path / "projects"
    root.mkdir()
    strange, live = root / "odd.jsonl", root / "s.jsonl"
    if odd == "fifo":
        os.mkfifo(strange)  # opening it for reading would block until a writer comes
    else:
        strange.symlink_to(strange)
    live.write_bytes(data)
    watcher = Watcher(event_log, [root])
    reports = []
    # File-system events name such paths like any file (sync(changed) is what they drive).
    syncing = threading.Thread(target=lambda: reports.append(watcher.sync({strange, live})))
    syncing.start()
    syncing.join(timeout=60)  # bounds a failure; a passing sync returns at once
    stuck = syncing.is_alive()
    if stuck:  # blocked in open(): be its writer, so the test run can end
        os.close(os.open(strange, os.O_WRONLY | os.O_NONBLOCK))
        syncing.join()
    assert not stuck, f"the sync blocked opening {strange}"
    assert reports, "the sync failed (see the thread's exception above)"
    assert reports[0].events_added == _reference(tmp_path, "live", data)
    assert set(watcher.followed) == {live}


def _events_of(log: EventLog, path: Path) -> int:
    [(count,)] = log.execute(
        "SELECT count(*) FROM conversation_history "
        "WHERE json_extract(metadata, '$.source_file') = ?",
        (str(path),),
    )
    return int(count)


def test_a_rewritten_document_is_read_again_and_a_half_written_one_retried(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    session = json.loads((transcripts / GEMINI).read_text(encoding="utf-8"))
    whole = session["messages"]
    live = tmp_path / "chats" / "session.json"
    live.parent.mkdir()
    session["messages"] = whole[:4]
    live.write_text(json.dumps(session), encoding="utf-8")
    watcher = Watcher(event_log, [live.parent])
    early = watcher.sync().events_added
    text = json.dumps({**session, "messages": whole})
    live.write_text(text[: len(text) // 2], encoding="utf-8")  # caught mid-rewrite
    half = watcher.sync()
    assert half.events_added == 0 and "retried when the file changes" in half.problems[0]
    live.write_text(text, encoding="utf-8")
    late = watcher.sync().events_added
    assert early + late == _reference(tmp_path, "gemini.json", text.encode())
