"""The guarded connection behind ``ms``: opening a bad store, threads, Ctrl-C inside SQLite."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scrollctx.errors import StoreError
from scrollctx.log import EventLog
from scrollctx.surface import _guard, open_surface
from scrollctx.surface._surface import call_deadline

# Enough rows that SQLite calls the progress handler many times (it runs every 2000 VM steps).
LONG_QUERY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
    "SELECT count(*) AS c FROM n"
)


def test_a_store_from_before_checksums_asks_for_the_upgrade(tmp_path: Path) -> None:
    # Exactly the two tables a store has always had, without the checksum column: an old
    # store (not a foreign database), so the message names the upgrade command.
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE conversation_history(seq INTEGER PRIMARY KEY, content TEXT)")
        conn.execute("CREATE TABLE _meta(key TEXT, value TEXT)")  # no index: two names only
    before = path.read_bytes()
    with pytest.raises(StoreError, match="written by an older scrollctx.*scroll doctor --upgrade"):
        open_surface(path)
    assert path.read_bytes() == before


def test_a_store_sqlite_cannot_open_read_only_says_so(own_store: Path) -> None:
    # A directory where the write-ahead log should be: SQLite cannot open the store at all
    # (SQLITE_CANTOPEN, none of the known failures), which is a StoreError naming the file.
    conn = sqlite3.connect(own_store)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()  # the last connection out checkpoints and removes the -wal file
    Path(f"{own_store}-wal").mkdir()
    with pytest.raises(
        StoreError, match=rf"cannot open {own_store} read-only: unable to open database file"
    ):
        open_surface(own_store)


def test_the_surface_answers_from_another_thread(store_path: Path) -> None:
    # The MCP server and the inspector open ms once and serve it from worker threads.
    with open_surface(store_path) as ms, ThreadPoolExecutor(1) as pool:
        here = [row["seq"] for row in ms.search("tolls")]
        there = pool.submit(lambda: [row["seq"] for row in ms.search("tolls")]).result()
    assert there == here and here


class CtrlCClock:
    """The deadline's clock, raising KeyboardInterrupt from its second reading on: the first
    arms the deadline, later ones run inside SQLite's progress handler, as a Ctrl-C arriving
    mid-statement would."""

    def __init__(self) -> None:
        self.readings = 0

    def monotonic(self) -> float:
        self.readings += 1
        if self.readings >= 2:
            raise KeyboardInterrupt
        return time.monotonic()


def test_ctrl_c_inside_a_statement_reaches_the_caller(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_surface(store_path) as ms:
        clock = CtrlCClock()
        monkeypatch.setattr(_guard, "time", clock)
        with pytest.raises(KeyboardInterrupt):
            ms.sql_query(LONG_QUERY)
        assert clock.readings == 2  # raised in the handler, and SQLite stopped there
        monkeypatch.undo()
        assert ms.sql_query(LONG_QUERY)[0]["c"] == 200_000  # the connection still works


def _run_with_checkpoint(tmp_path: Path, go_on: bool) -> tuple[bool, int]:
    # A checkpoint due at once: SQLite's first progress call asks it. Returns whether the
    # result was cut short, and how many times the checkpoint was asked.
    EventLog.open(tmp_path / "history.db").close()
    asked: list[bool] = []

    def answer() -> bool:
        asked.append(go_on)
        return go_on

    with open_surface(tmp_path / "history.db") as ms:
        call_deadline(ms).checkpoint = (time.monotonic(), answer)
        return ms.sql_query(LONG_QUERY).partial, len(asked)


def test_a_checkpoint_that_says_no_ends_the_call_there_as_partial(tmp_path: Path) -> None:
    assert _run_with_checkpoint(tmp_path, go_on=False) == (True, 1)


def test_a_checkpoint_that_says_go_on_is_asked_once_and_the_call_finishes(tmp_path: Path) -> None:
    assert _run_with_checkpoint(tmp_path, go_on=True) == (False, 1)


def test_after_a_checkpoint_says_no_every_later_statement_of_the_call_ends_too(
    tmp_path: Path,
) -> None:
    # A call may run many statements, each under its own budget (ms.index looks up each
    # stored block): the cut holds across them until its owner resets it.
    EventLog.open(tmp_path / "history.db").close()
    with open_surface(tmp_path / "history.db") as ms:
        deadline = call_deadline(ms)
        deadline.checkpoint = (time.monotonic(), lambda: False)
        assert ms.sql_query(LONG_QUERY).partial
        assert deadline.checkpoint is None and deadline.cut
        assert ms.sql_query(LONG_QUERY).partial  # a new budget, still cut
        deadline.cut = False
        assert not ms.sql_query(LONG_QUERY).partial
