"""ms never writes: every write path is refused with QueryError and the log stays byte-identical."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from surface_helpers import digest

from scrollctx.errors import IntegrityError, QueryError, StoreError
from scrollctx.surface import open_surface

ATTACKS = [
    "INSERT INTO hist.conversation_history(session_id, kind, created_at) VALUES ('x','y','z')",
    "WITH v AS (SELECT 1) INSERT INTO hist.conversation_history(session_id, kind, created_at) "
    "SELECT 'x', 'y', 'z' FROM v",
    "UPDATE hist.conversation_history SET content = 'gone'",
    "DELETE FROM hist.conversation_history",
    "ATTACH DATABASE '{folder}/other.db' AS other",
    "DETACH DATABASE hist",
    "PRAGMA hist.journal_mode=delete",
    "PRAGMA query_only=0",
    "PRAGMA writable_schema=1",
    "PRAGMA hist.user_version=7",
    "CREATE TABLE hist.x(a)",
    "CREATE TEMP TABLE scratch(a)",
    "DROP TABLE hist.conversation_history",
    "CREATE VIRTUAL TABLE temp.f USING fts5(x)",
    "SELECT 1; DELETE FROM hist.conversation_history",
    "SELECT 1; SELECT 2",
    "VACUUM hist INTO '{folder}/copy.db'",
    "  /* comment */ -- line\n VACUUM INTO '{folder}/copy2.db'",
    "SELECT load_extension('/tmp/evil')",
    "REINDEX hist.ch_kind",
    "ANALYZE hist",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_write_paths_are_refused_and_the_log_is_unchanged(own_store: Path, attack: str) -> None:
    folder = own_store.parent
    with open_surface(own_store) as ms:
        before = digest(own_store)
        with pytest.raises(QueryError) as info:
            ms.sql_query(attack.format(folder=folder))
        assert info.value.query is not None
        assert digest(own_store) == before
    assert not (folder / "other.db").exists()
    assert not (folder / "copy.db").exists() and not (folder / "copy2.db").exists()
    with sqlite3.connect(own_store) as check:
        assert check.execute("SELECT count(*) FROM conversation_history").fetchone()[0] == 15


def test_reads_and_read_pragmas_still_work(own_store: Path) -> None:
    with open_surface(own_store) as ms:
        assert ms.sql_query("PRAGMA table_info(conversation_history)")[0]["name"] == "seq"
        assert ms.sql_query("PRAGMA hist.journal_mode")[0]["journal_mode"] == "wal"
        assert (
            ms.sql_query(
                "SELECT json_extract(metadata, '$.date') AS d FROM "
                "hist.conversation_history WHERE seq = 1"
            )[0]["d"]
            == "2024-03-01"
        )
        rows = ms.sql_query(
            "SELECT rowid, snippet(conversation_history_fts, 0, '[', ']', '…', 5) AS s, "
            "bm25(conversation_history_fts) AS r FROM hist.conversation_history_fts "
            "WHERE conversation_history_fts MATCH 'tolls' ORDER BY rank"
        )
        assert {r["rowid"] for r in rows} == {7, 8}


def test_no_public_attribute_exposes_a_connection(own_store: Path) -> None:
    with open_surface(own_store) as ms:
        public = [getattr(ms, name) for name in dir(ms) if not name.startswith("_")]
        assert not any(isinstance(value, sqlite3.Connection | sqlite3.Cursor) for value in public)
        with pytest.raises(AttributeError):
            ms.conn = None  # type: ignore[attr-defined]


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nothing" / "history.db"
    with pytest.raises(StoreError, match="scroll ingest"):
        open_surface(path)
    assert not path.exists() and not path.parent.exists()


def test_the_writer_can_append_while_the_surface_reads(own_store: Path) -> None:
    from scrollctx.log import EventLog, NewEvent

    with open_surface(own_store) as ms, EventLog.open(own_store) as log:
        seq = log.append(NewEvent(session_id="s9", kind="conversation", content="late arrival"))
        assert [r["seq"] for r in ms.search("late arrival")] == [seq]


def test_a_file_that_is_not_a_store_is_an_integrity_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t(x)")
    before = {p.name: p.read_bytes() for p in (junk, other)}
    for path, message in (
        (junk, "junk.db is not a usable Event Log: file is not a database"),
        (other, "other.db is a SQLite database but not a scrollctx store"),
    ):
        with pytest.raises(IntegrityError, match=message):
            open_surface(path)
    assert {p.name: p.read_bytes() for p in (junk, other)} == before
