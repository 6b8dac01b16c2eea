"""What only a SQLite file store can suffer: foreign or torn files, lost payload files, locks.

The guarantees every backend keeps are in ``test_store.py``, run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_helpers import index_matches_the_rows, matches
from store_helpers import turn as _turn

from scrollctx.errors import IntegrityError, PayloadMissing, StoreError
from scrollctx.log import EventLog, NewEvent
from scrollctx.log._schema import MIGRATIONS


def test_an_index_gap_would_be_caught(event_log: EventLog) -> None:
    # The check above must be able to fail: a row written around append_many is not indexed.
    event_log.append(_turn("indexed"))
    with event_log.atomic() as conn:
        conn.execute(
            "INSERT INTO conversation_history(session_id, kind, content, created_at) "
            "VALUES ('s1', 'user_message', 'smuggled', '2024-01-01T00:00:00Z')"
        )
    assert matches(event_log, "smuggled") == []
    with pytest.raises(IntegrityError, match="malformed"):
        index_matches_the_rows(event_log)


def test_same_payload_is_stored_once(event_log: EventLog) -> None:
    big = "x" * 40_000
    a = event_log.get(event_log.append(NewEvent(session_id="s1", kind="tool_result", content=big)))
    b = event_log.get(event_log.append(NewEvent(session_id="s2", kind="tool_result", content=big)))
    assert a.payload_sha256 == b.payload_sha256
    assert len([p for p in event_log.payloads.root.rglob("*") if p.is_file()]) == 1


def test_missing_payload_is_reported_not_empty(event_log: EventLog) -> None:
    seq = event_log.append(NewEvent(session_id="s1", kind="tool_result", content="y" * 30_000))
    event = event_log.get(seq)
    assert event.payload_sha256 is not None
    event_log.payloads.path_for(event.payload_sha256).unlink()
    with pytest.raises(PayloadMissing, match=f"seq {seq}") as info:
        event_log.full_text(event)
    assert info.value.seq == seq


def test_corrupt_payload_is_reported(event_log: EventLog) -> None:
    seq = event_log.append(NewEvent(session_id="s1", kind="tool_result", content="z" * 30_000))
    sha = event_log.get(seq).payload_sha256
    assert sha is not None
    event_log.payloads.path_for(sha).write_text("tampered")
    with pytest.raises(PayloadMissing, match="does not match"):
        event_log.full_text(event_log.get(seq))


def test_store_without_fts5_records_it(store_dir: Path) -> None:
    with EventLog.open(store_dir / "history.db", fts5=False) as log:
        log.append(_turn("no full text index here"))
        assert not log.has_fts5
    with EventLog.open(store_dir / "history.db") as log:
        assert not log.has_fts5


@pytest.mark.parametrize(
    "content",
    [b"this is not sqlite at all, just text" * 10, b"SQLite format 3\x00" + b"\xff" * 5000],
)
def test_foreign_or_corrupt_file_is_reported_not_replaced(store_dir: Path, content: bytes) -> None:
    path = store_dir / "history.db"
    path.write_bytes(content)
    with pytest.raises(IntegrityError) as info:
        EventLog.open(path)
    assert info.value.exit_code == 3
    assert path.read_bytes() == content


def test_an_empty_file_becomes_a_new_store(store_dir: Path) -> None:
    # What `touch`, or a crash before SQLite's first write, leaves: nothing to lose, no header.
    path = store_dir / "history.db"
    path.touch()
    with EventLog.open(path=path) as log:  # `path` may be given by name
        assert log.append(_turn("first")) == 1
    assert path.read_bytes().startswith(b"SQLite format 3\x00")


def test_other_sqlite_database_is_not_taken_over(store_dir: Path) -> None:
    path = store_dir / "history.db"
    conn = sqlite3.connect(path)
    for name in ("invoices", "orders", "clients", "b", "a", "z", "m"):
        conn.execute(f"CREATE TABLE {name} (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    # The message names the first five tables in order, enough to recognise the database.
    with pytest.raises(
        IntegrityError, match=r"not a scrollctx store \(tables: a, b, clients, invoices, m\);"
    ):
        EventLog.open(path)
    assert path.read_bytes() == before  # refused untouched: not even switched to WAL


def test_torn_database_page_fails_quick_check(store_dir: Path) -> None:
    path = store_dir / "history.db"
    with EventLog.open(path) as log:
        log.append_many(_turn("padding " * 200) for _ in range(300))
        log.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[page * 5 : page * 5 + 200] = b"\x00\x17" * 100  # tear an interior page
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        with EventLog.open(path, verify=True) as log:
            log.count()


def test_a_torn_page_found_by_a_read_is_an_integrity_error(store_dir: Path) -> None:
    # Opened without verify=True: the damage shows only when a read reaches the page, here
    # the one holding row 150 (found by its text in the file, then its page header torn).
    path = store_dir / "history.db"
    with EventLog.open(path) as log:
        log.append_many(_turn(f"row {n} " + "padding " * 200) for n in range(1, 301))
        log.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = data.index(b"row 150 ") // 4096 * 4096
    data[page : page + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with EventLog.open(path) as log:
        with pytest.raises(IntegrityError, match=f"{path} is corrupt \\(read failed: "):
            log.span(1, 300)


# The layout stores had before the writer indexed per batch (a per-row trigger, the log table as
# the FTS content). Written out here because the code that made it is gone.
_OLD_LAYOUT = """
CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE conversation_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, agent_id TEXT,
    run_id TEXT, task_id TEXT, step_index INTEGER, msg_index INTEGER, kind TEXT NOT NULL,
    role TEXT, name TEXT, content TEXT NOT NULL DEFAULT '', prose TEXT NOT NULL DEFAULT '',
    code TEXT NOT NULL DEFAULT '', headline TEXT, label TEXT, tool_call_id TEXT,
    tool_input TEXT, tool_state TEXT, metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL, dedup_key TEXT, payload_sha256 TEXT, payload_size INTEGER,
    searchable INTEGER NOT NULL DEFAULT 1);
CREATE UNIQUE INDEX ch_dedup ON conversation_history(session_id, dedup_key);
CREATE VIRTUAL TABLE conversation_history_fts USING fts5(prose, code, headline,
    content='conversation_history', content_rowid='seq', tokenize='porter unicode61');
CREATE TRIGGER ch_fts_insert AFTER INSERT ON conversation_history WHEN new.searchable
BEGIN
    INSERT INTO conversation_history_fts(rowid, prose, code, headline)
    VALUES (new.seq, new.prose, new.code, COALESCE(new.headline, ''));
END;
CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO _meta VALUES ('fts5', '1');
INSERT INTO _migrations VALUES ('m001_conversation_history', 'then'), ('m002_store_meta', 'then');
INSERT INTO conversation_history(session_id, kind, content, prose, created_at)
VALUES ('old', 'user_message', 'an older kestrel sighting', 'an older kestrel sighting', 'then');
"""


def test_a_store_from_before_batch_indexing_is_upgraded_once(store_dir: Path) -> None:
    path = store_dir / "history.db"
    with sqlite3.connect(path) as old:
        old.executescript(_OLD_LAYOUT)
    with EventLog.open(path) as log:
        log.append(_turn("a newer kestrel"))
        log.append_many([_turn("batch kestrel one"), _turn("batch kestrel two")])
        assert matches(log, "kestrel") == [1, 2, 3, 4]  # each row once
        index_matches_the_rows(log)
        assert not log.execute("SELECT 1 FROM sqlite_master WHERE name = 'ch_fts_insert'")
    with EventLog.open(path, verify=True) as log:
        assert len(log.execute("SELECT * FROM _migrations")) == len(MIGRATIONS)
        assert matches(log, "older") == [1]


def test_a_file_in_the_way_of_the_store_folder_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "store"
    blocker.write_text("not a folder", encoding="utf-8")
    # The OS's reason in words (strerror), not the exception's repr with its errno.
    with pytest.raises(StoreError) as info:
        EventLog.open(blocker / "history.db")
    assert str(info.value) == (
        f"cannot create the store folder {blocker}: File exists; "
        "point --store at a folder you can write"
    )
    assert not isinstance(info.value, IntegrityError)
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_a_folder_where_the_log_file_should_be_is_a_store_error(store_dir: Path) -> None:
    (store_dir / "history.db").mkdir()
    with pytest.raises(StoreError, match="is a folder"):
        EventLog.open(store_dir / "history.db")


def test_a_failure_that_is_not_a_lock_is_reported_at_once_as_such(store_dir: Path) -> None:
    # A folder where SQLite must create the -wal: the switch to WAL fails with an I/O error,
    # which no waiting cures. It is not retried, nor blamed on another process's lock.
    path = store_dir / "history.db"
    Path(f"{path}-wal").mkdir()
    with pytest.raises(
        StoreError, match=r"disk I/O error; check that the folder and file are writable$"
    ):
        EventLog.open(path, lock_timeout=60)


def test_a_store_locked_past_the_timeout_is_a_clear_store_error(store_dir: Path) -> None:
    # A brand-new file still in rollback-journal mode, held under an exclusive lock by
    # another connection: switching it to WAL cannot succeed until that lock is released.
    path = store_dir / "history.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="held its lock for over 0.2 s"):
            EventLog.open(path, lock_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
    with EventLog.open(path) as log:  # once released, the same open succeeds
        assert log.count() == 0
    holder.close()
