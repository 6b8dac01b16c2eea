"""``scroll watch`` as a real process, fed by a real writer process; synchronised on the store."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

CLAUDE = "claude-code/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
CODEX = "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
WRITER = """
import os, sys
for command in sys.stdin:
    op, path, source, start, end = command.split()
    data = open(source, "rb").read()[int(start):int(end)]
    if op == "append":
        with open(path, "ab") as handle:
            handle.write(data)
    else:  # replace: write beside, then rename over (how editors and rotations do it)
        with open(path + ".part", "wb") as handle:
            handle.write(data)
        os.replace(path + ".part", path)
    print("done", flush=True)
"""


class Writer:
    """A separate process that appends or replaces bytes when told (a stand-in agent)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def do(self, op: str, path: Path, source: Path, start: int, end: int) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(f"{op} {path} {source} {start} {end}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def close(self) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll the store until ``condition`` holds (the only synchronisation these tests use)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def count_in(db: Path, session_like: str) -> int:
    if not db.exists():
        return -1
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sql = "SELECT count(*) FROM conversation_history WHERE session_id LIKE ?"
        return int(conn.execute(sql, (session_like,)).fetchone()[0])
    except sqlite3.OperationalError:  # the watcher has not created the table yet
        return -1
    finally:
        conn.close()


def offsets(path: Path) -> list[int]:
    """Byte offset of the end of each line."""
    ends, total = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        total += len(line)
        ends.append(total)
    return ends


def reference(tmp_path: Path, source: Path, end: int, name: str) -> int:
    part = tmp_path / "reference" / name / source.name
    part.parent.mkdir(parents=True)
    part.write_bytes(source.read_bytes()[:end])
    with EventLog.open(part.parent / "store" / "history.db") as log:
        return ingest_path(log, part).events_added


@pytest.fixture
def writer() -> Iterator[Writer]:
    started = Writer()
    yield started
    started.close()


def start_watch(store: Path, folder: Path, *extra: str) -> subprocess.Popen[str]:
    script = Path(sys.executable).parent / "scroll"
    return subprocess.Popen(
        [str(script), "watch", "--store", str(store), "--json", str(folder), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.parametrize("mode", [(), ("--poll", "--interval", "0.1")], ids=["events", "poll"])
def test_watch_follows_a_live_transcript(
    tmp_path: Path, transcripts: Path, writer: Writer, mode: tuple[str, ...]
) -> None:
    source, sentinel_source = transcripts / CLAUDE, transcripts / CODEX
    ends, sentinel_ends = offsets(source), offsets(sentinel_source)
    folder = tmp_path / "projects" / "demo"
    folder.mkdir(parents=True)
    live, sentinel = folder / source.name, folder / "rollout-x.jsonl"
    db = tmp_path / "store" / "history.db"
    expected = {n: reference(tmp_path, source, ends[n - 1], f"l{n}") for n in (30, 31, 60)}
    whole = reference(tmp_path, source, ends[-1], "whole")
    sentinel_expected = {
        n: reference(tmp_path, sentinel_source, sentinel_ends[n - 1], f"c{n}") for n in (5, 10)
    }
    claude, codex = "claude-code:%", "codex:%"
    watch = start_watch(tmp_path / "store", tmp_path / "projects", *mode)
    try:
        wait_for(lambda: count_in(db, "%") == 0, "the watcher's store")
        writer.do("append", live, source, 0, ends[29])
        wait_for(lambda: count_in(db, claude) == expected[30], "30 lines")
        # Half a line: held back. Two sentinel writes seen later prove the watcher looked.
        writer.do("append", live, source, ends[29], ends[29] + 50)
        for start, n in ((0, 5), (sentinel_ends[4], 10)):
            writer.do("append", sentinel, sentinel_source, start, sentinel_ends[n - 1])
            wait_for(lambda n=n: count_in(db, codex) == sentinel_expected[n], f"sentinel {n}")
        assert count_in(db, claude) == expected[30]
        writer.do("append", live, source, ends[29] + 50, ends[59])
        wait_for(lambda: count_in(db, claude) == expected[60], "the completed line and 29 more")
        writer.do("replace", live, source, 0, ends[-1])  # a file replaced under the watcher
        wait_for(lambda: count_in(db, claude) == whole, "the replaced file's new lines")
    finally:
        watch.send_signal(signal.SIGTERM)
        out, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    assert "has no newline" not in err
    syncs = [json.loads(line) for line in out.splitlines()]
    assert sum(s["events_added"] for s in syncs) == count_in(db, "%")
    again = subprocess.run(
        [str(Path(sys.executable).parent / "scroll"), "watch", "--once", "--json", "--store",
         str(tmp_path / "store"), str(tmp_path / "projects")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["events_added"] == 0  # a restart adds nothing


def test_a_folder_that_does_not_exist_is_named_not_watched_in_silence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scrollctx.cli import run

    typo = tmp_path / ".claude" / "project"
    assert run(["watch", "--once", str(typo), "--store", str(tmp_path / "store")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {typo} does not exist (yet); its files are imported once it does" in err
