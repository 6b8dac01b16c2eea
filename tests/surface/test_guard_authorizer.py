"""The SQL authorizer of ``ms``, rule by rule, with every other layer taken away.

``ms`` refuses writes in three ways (a keyword filter, the ``mode=ro`` attach, and the
authorizer in ``surface/_guard.py``); the attack tests in ``test_surface_readonly.py`` are
stopped by the first two before the authorizer is asked. Here the log is attached read-write,
``query_only`` is off and statements go straight to SQLite, so the authorizer is the only thing
that can refuse them. Each case first runs its statement on an identical connection without the
authorizer and sees it succeed (nothing else would stop it), then sees the guarded connection
refuse it with "not authorized" and leave the files unchanged.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from surface_helpers import digest, write_store

from needs import missing
from scrollctx.surface._guard import _authorize

# statement -> the rule it exercises. {folder} is the test's own folder.
DDL = [
    "CREATE TABLE hist.planted(a)",
    "CREATE TEMP TABLE planted(a)",
    "CREATE INDEX hist.planted_ix ON conversation_history(kind)",
    "CREATE TEMP VIEW planted_v AS SELECT 1",
    "CREATE VIEW hist.planted_v AS SELECT 1",
    "CREATE TRIGGER hist.planted_t AFTER INSERT ON conversation_history BEGIN SELECT 1; END",
    "CREATE TEMP TRIGGER planted_t AFTER INSERT ON hist.conversation_history BEGIN SELECT 1; END",
    "CREATE VIRTUAL TABLE temp.planted_f USING fts5(x)",
    "DROP TABLE hist._meta",
    "DROP INDEX hist.ch_task",
    "DROP VIEW hist.conversation_history_text",
    "DROP TRIGGER hist.ch_no_update",
    "DROP TABLE hist.conversation_history_fts",
    "DROP TABLE temp.scratch",
    "ALTER TABLE hist.conversation_history ADD COLUMN planted TEXT",
    "REINDEX hist.ch_task",
    "ANALYZE hist",
]
WRITES = [
    "INSERT INTO hist.conversation_history(session_id, kind, created_at) VALUES ('x', 'y', 'z')",
    "UPDATE hist._meta SET value = '0' WHERE key = 'fts5'",
    "DELETE FROM hist._meta",
    "INSERT INTO temp.scratch VALUES (1)",
    "UPDATE temp.scratch SET a = 2",
    "DELETE FROM temp.scratch",
    # main's schema is the one write let through (FTS5 declares itself there); not its tables,
    # and not the log's schema
    "INSERT INTO main.planted VALUES (1)",
    "UPDATE hist.sqlite_master SET sql = sql WHERE name = 'no such object'",
]
ATTACH = [
    "ATTACH DATABASE '{folder}/other.db' AS other",
    "DETACH DATABASE hist",
    "VACUUM hist INTO '{folder}/copy.db'",
]
PRAGMAS = [
    "PRAGMA hist.user_version = 7",  # a read pragma given a value writes
    "PRAGMA hist.journal_mode = DELETE",
    "PRAGMA query_only = 1",
    "PRAGMA writable_schema = 1",  # not a read pragma at all
    "PRAGMA hist.wal_checkpoint(TRUNCATE)",
    "PRAGMA hist.incremental_vacuum",
]
FUNCTIONS = [
    "SELECT writefile('{folder}/planted.txt', 'x')",
    "SELECT readfile('{folder}/secret.txt')",
    "SELECT load_extension('{folder}/planted.so')",
]


_DENIED = {"authorization denied"}  # what SQLite says when the ATTACH inside VACUUM INTO is denied


def _files(folder: Path) -> dict[str, str]:
    return {p.name: digest(p) for p in sorted(folder.iterdir()) if p.is_file()}


def _connect(db: Path, *, guarded: bool) -> sqlite3.Connection:
    """The log attached read-write as ``hist``: no mode=ro, no query_only, no keyword filter."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("ATTACH DATABASE ? AS hist", (str(db),))
    conn.execute("CREATE TEMP TABLE scratch(a)")  # made before the authorizer, to write to
    conn.execute("INSERT INTO temp.scratch VALUES (0)")
    conn.execute("CREATE TABLE main.planted(a)")
    conn.execute("PRAGMA writable_schema = ON")  # so that writing hist's schema would run
    # Functions some SQLite builds have (the shell's fileio; load_extension where extension
    # loading is enabled, which this Python's may not be), given to this connection for real --
    # a user function of the same name replaces a built-in -- so the rule that denies them by
    # name is tested on every build. "Loading" here writes the file it names.
    conn.create_function("writefile", 2, _write_file)
    conn.create_function("readfile", 1, lambda path: Path(path).read_bytes())
    conn.create_function("load_extension", 1, lambda path: _write_file(path, "loaded"))
    if guarded:
        conn.set_authorizer(_authorize)
    return conn


def _write_file(path: str, data: str) -> int:
    return Path(path).write_text(data, encoding="utf-8")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A folder with two identical stores: ``control/`` and ``guarded/``."""
    for name in ("control", "guarded"):
        folder = tmp_path / name
        folder.mkdir()
        write_store(folder)
        (folder / "secret.txt").write_text("do not read", encoding="utf-8")
    return tmp_path


def _refused(statement: str, root: Path, unguarded_ok: Callable[[str], bool]) -> None:
    control = root / "control"
    conn = _connect(control / "history.db", guarded=False)
    try:
        outcome = _run(conn, statement.format(folder=control))
    finally:
        conn.close()
    assert unguarded_ok(outcome), f"without the authorizer it must run: {statement} ({outcome})"
    folder = root / "guarded"
    before = _files(folder)
    conn = _connect(folder / "history.db", guarded=True)
    try:
        outcome = _run(conn, statement.format(folder=folder))
        assert outcome in _DENIED or "not authorized" in outcome, (statement, outcome)
        assert conn.execute("SELECT count(*) FROM hist.conversation_history").fetchone()[0] == 15
        assert conn.execute("SELECT a FROM temp.scratch").fetchall() == [(0,)]
    finally:
        conn.close()
    assert _files(folder) == before


def _run(conn: sqlite3.Connection, sql: str) -> str:
    """Run one statement; return 'ok' or the error text."""
    try:
        conn.execute(sql).fetchall()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return "ok"


@pytest.mark.parametrize("statement", DDL + WRITES + ATTACH + PRAGMAS[:4])
def test_the_authorizer_alone_refuses(store: Path, statement: str) -> None:
    _refused(statement, store, lambda outcome: outcome == "ok")


@pytest.mark.parametrize("statement", PRAGMAS[4:])
def test_the_authorizer_alone_refuses_unlisted_pragmas(store: Path, statement: str) -> None:
    _refused(statement, store, lambda outcome: outcome == "ok")


@pytest.mark.parametrize("statement", FUNCTIONS)
def test_the_authorizer_alone_refuses_file_and_extension_functions(
    store: Path, statement: str
) -> None:
    _refused(statement, store, lambda outcome: outcome == "ok")


def test_fts3_tokenizer_is_refused_where_the_build_has_it(store: Path) -> None:
    probe = sqlite3.connect(":memory:")
    names = {row[0] for row in probe.execute("SELECT name FROM pragma_function_list")}
    probe.close()
    if "fts3_tokenizer" not in names:
        missing("this SQLite build has no fts3_tokenizer()")
    _refused("SELECT fts3_tokenizer('simple')", store, lambda o: "not authorized" not in o)


def test_reads_read_pragmas_and_fts5_functions_are_allowed(store: Path) -> None:
    conn = _connect(store / "guarded" / "history.db", guarded=True)
    try:
        for sql in (
            "SELECT count(*), max(json_extract(metadata, '$.date')) FROM hist.conversation_history",
            "PRAGMA hist.table_info(conversation_history)",
            "PRAGMA hist.journal_mode",
            "SELECT bm25(conversation_history_fts), snippet(conversation_history_fts, 0, '[', "
            "']', '…', 4) FROM hist.conversation_history_fts "
            "WHERE conversation_history_fts MATCH 'tolls'",
            "SELECT a FROM temp.scratch",
        ):
            assert _run(conn, sql) == "ok", sql
    finally:
        conn.close()
