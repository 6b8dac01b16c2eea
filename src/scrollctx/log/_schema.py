"""Schema history of the Event Log, as code.

Migrations are an ordered list of uniquely numbered ``mNNN_what`` functions. Each runs once, in
its own transaction, and is recorded in ``_migrations``. Never edit a migration that has
shipped: add a new one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from scrollctx.log._integrity import CHECKSUM_COLUMNS, stored_checksum

__all__ = ["MIGRATIONS", "apply_migrations", "fts5_available"]

Migration = Callable[[sqlite3.Connection, bool], None]


def m001_conversation_history(conn: sqlite3.Connection, fts5: bool) -> None:
    # One table for every agent, session and kind: ``seq`` is the only address and must be
    # global, so AUTOINCREMENT guarantees a seq is never reused even after the last row is
    # gone (rows are never deleted, but a rolled-back batch must not hand its seqs out again).
    # ``prose``/``code`` hold the fenced-code split of ``content`` so search can weight them
    # apart (``prose`` is '' when it would equal ``content``, to store the text once);
    # ``label`` is the write-time extractive label for rows without a headline.
    conn.execute(
        """
        CREATE TABLE conversation_history (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL,
            agent_id TEXT,
            run_id TEXT,
            task_id TEXT,
            step_index INTEGER,
            msg_index INTEGER,
            kind TEXT NOT NULL,
            role TEXT,
            name TEXT,
            content TEXT NOT NULL DEFAULT '',
            prose TEXT NOT NULL DEFAULT '',  -- '' when equal to content (no fenced code)
            code TEXT NOT NULL DEFAULT '',
            headline TEXT,
            label TEXT,
            tool_call_id TEXT,
            tool_input TEXT,
            tool_state TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            dedup_key TEXT,
            payload_sha256 TEXT,
            payload_size INTEGER,
            searchable INTEGER NOT NULL DEFAULT 1
        )
        """
    )
    # Every index costs each append; keep the ones the surface's filters and the paper's SQL
    # use (session/task scope, date ranges, step_index = session number) and make the sparse
    # ones partial. NULL dedup keys never conflict, so only keyed appends are idempotent.
    for name, columns, where in [
        ("ch_session", "session_id, seq", ""),
        ("ch_task", "task_id, seq", ""),
        ("ch_created_at", "created_at", ""),
        ("ch_step", "step_index, msg_index", ""),
        ("ch_tool_call", "tool_call_id", "tool_call_id IS NOT NULL"),
    ]:
        conn.execute(
            f"CREATE INDEX {name} ON conversation_history({columns})"
            + (f" WHERE {where}" if where else "")
        )
    conn.execute(
        "CREATE UNIQUE INDEX ch_dedup ON conversation_history(session_id, dedup_key) "
        "WHERE dedup_key IS NOT NULL"
    )
    # Append-only is enforced by the database itself, not by convention in Python.
    for action in ("UPDATE", "DELETE"):
        _refuse(conn, action)
    if fts5:
        _create_fts(conn)


def _refuse(
    conn: sqlite3.Connection, action: str, table: str = "conversation_history", prefix: str = "ch"
) -> None:
    conn.execute(
        f"""
        CREATE TRIGGER {prefix}_no_{action.lower()} BEFORE {action} ON {table}
        BEGIN
            SELECT RAISE(ABORT, '{table} is append-only: {action} refused');
        END
        """
    )


def _create_fts(conn: sqlite3.Connection) -> None:
    # The FTS text comes from a view, not from stored copies: ``prose`` is stored only when a
    # fenced code block made it differ from ``content`` (else it is ''), so the view supplies
    # the content itself. Rows marked not searchable (recall-tool observations) stay out, so
    # recall never finds its own echoes. The index is filled by the writer once per batch in a
    # single INSERT…SELECT: a per-row trigger made FTS5 flush a segment for every row.
    conn.execute(
        """
        CREATE VIEW conversation_history_text AS
        SELECT seq,
               CASE WHEN prose = '' THEN content ELSE prose END AS prose,
               code,
               COALESCE(headline, '') AS headline
        FROM conversation_history
        WHERE searchable
        """
    )
    conn.execute(
        """
        CREATE VIRTUAL TABLE conversation_history_fts USING fts5(
            prose, code, headline,
            content='conversation_history_text', content_rowid='seq',
            tokenize='porter unicode61'
        )
        """
    )


def m002_store_meta(conn: sqlite3.Connection, fts5: bool) -> None:
    # Facts about the store that readers need without guessing (is FTS5 there?).
    conn.execute("CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO _meta(key, value) VALUES ('fts5', ?)", ("1" if fts5 else "0",))


def m003_batch_indexing(conn: sqlite3.Connection, fts5: bool) -> None:
    # Stores created before the writer indexed per batch have a per-row FTS trigger and an FTS
    # table whose content is the log table itself. With today's writer they would index each
    # row twice, so rebuild their index on the view. Other stores have nothing to change.
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'ch_fts_insert'"
    ).fetchone()
    if found is None:
        return
    conn.execute("DROP TRIGGER ch_fts_insert")
    conn.execute("DROP TABLE conversation_history_fts")
    _create_fts(conn)
    conn.execute(
        "INSERT INTO conversation_history_fts(conversation_history_fts) VALUES ('rebuild')"
    )


def m004_event_checksums(conn: sqlite3.Connection, fts5: bool) -> None:
    # Every row carries a checksum (see log/_integrity.py) that readers verify, so a flipped
    # byte is an IntegrityError naming the seq instead of a silently served row. Rows already
    # in the store are backfilled here. The append-only trigger refuses every UPDATE, so this
    # migration drops it, writes the new column of each row and creates the trigger again --
    # all inside the one transaction apply_migrations opened with BEGIN IMMEDIATE: the write
    # lock is held throughout, so no other writer can run while the trigger is gone, WAL
    # readers see the table entirely before or entirely after, and any failure rolls the whole
    # of it back, trigger included. Only ``checksum`` is written; no other column changes, and
    # the full-text index (which reads prose, code and headline) stays valid. A row damaged
    # before this upgrade gets the checksum of its damaged state: there is nothing older to
    # compare it with (a row whose text is no longer valid UTF-8 fails the upgrade, and with it
    # the open, as an IntegrityError: it is never given a checksum).
    conn.execute("ALTER TABLE conversation_history ADD COLUMN checksum TEXT")
    conn.execute("DROP TRIGGER IF EXISTS ch_no_update")
    names = ", ".join(CHECKSUM_COLUMNS)
    after = 0
    while True:
        rows = conn.execute(
            f"SELECT {names} FROM conversation_history WHERE seq > ? ORDER BY seq LIMIT 1000",
            (after,),
        ).fetchall()
        if not rows:
            break
        conn.executemany(
            "UPDATE conversation_history SET checksum = ? WHERE seq = ?",
            [(stored_checksum(row), row["seq"]) for row in rows],
        )
        after = rows[-1]["seq"]
    _refuse(conn, "UPDATE")


def m005_embeddings(conn: sqlite3.Connection, fts5: bool) -> None:
    # Vectors of the semantic channel live in the store itself, so a copy of the file carries
    # them and the surface reads them over the same read-only ATTACH (no extension to load:
    # the surface's authorizer refuses load_extension). One row per (model, seq, window): a
    # long row has one vector per window of word pieces. ``vector`` is little-endian float16
    # (half the bytes of float32; cosines move by ~1e-3). ``embedding_models.through_seq``
    # says every row up to that seq is embedded (rows without text have no vector), and moves
    # in the same transaction as the vectors, so a killed embedder resumes without repeats.
    conn.execute(
        """
        CREATE TABLE conversation_embeddings (
            model TEXT NOT NULL,
            seq INTEGER NOT NULL,
            window INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, seq, window)
        ) WITHOUT ROWID
        """
    )
    conn.execute(
        "CREATE TABLE embedding_models (model TEXT PRIMARY KEY, dim INTEGER NOT NULL, "
        "through_seq INTEGER NOT NULL)"
    )
    for action in ("UPDATE", "DELETE"):
        _refuse(conn, action, "conversation_embeddings", "ce")


MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_conversation_history", m001_conversation_history),
    ("m002_store_meta", m002_store_meta),
    ("m003_batch_indexing", m003_batch_indexing),
    ("m004_event_checksums", m004_event_checksums),
    ("m005_embeddings", m005_embeddings),
]


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Return whether this SQLite build can create FTS5 tables."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp._fts5_probe")
    return True


def apply_migrations(conn: sqlite3.Connection, *, fts5: bool) -> list[str]:
    """Apply every migration not yet recorded; return the names applied now."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    applied = []
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("ROLLBACK")  # another process applied it while we waited
                continue
            migration(conn, fts5)
            conn.execute(
                "INSERT INTO _migrations(name, applied_at) VALUES (?, datetime('now'))", (name,)
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied
