"""Schema history of the PostgreSQL Event Log, as code.

The same rules as the SQLite schema (``_schema``): an ordered list of uniquely numbered
``mNNN_what`` functions, each applied once in its own transaction and recorded in
``_migrations``; never edit one that has shipped. Concurrent openers take a transaction-level
advisory lock, so two hosts opening a new database at once apply each migration once.

What the database itself enforces, whoever connects (psql included):

- ``conversation_history`` and ``payloads`` are append-only: UPDATE, DELETE and TRUNCATE are
  refused by triggers.
- Monotonic visibility: a statement trigger on ``conversation_history`` takes the row lock on
  ``log_head``, refuses any seq at or below ``log_head.last_seq`` and advances it. The lock is
  held until commit, so transactions commit in seq order (see ``_postgres``).
- ``payloads`` is content-addressed: a row's ``sha256`` must be the digest of its bytes, and a
  log row may reference only a payload that exists (foreign key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

__all__ = ["MIGRATIONS", "apply_migrations", "pending_migrations"]

Migration = Callable[[psycopg.Connection[Any]], None]

_LOCK_KEY = 0x5C2011  # the advisory lock that serializes migrations of one database


def m001_conversation_history(conn: psycopg.Connection[Any]) -> None:
    # ``_meta.store_id`` names this log: a replica records it and is rebuilt when it finds
    # another store's id (the URL now points at another database, or one restored elsewhere).
    conn.execute("CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO _meta VALUES ('store_id', gen_random_uuid()::text)")
    # A team shares no file system, so payloads live in the database, named by their digest.
    conn.execute(
        """
        CREATE TABLE payloads (
            sha256 TEXT PRIMARY KEY CHECK (sha256 = encode(sha256(data), 'hex')),
            size BIGINT NOT NULL CHECK (size = octet_length(data)),
            data BYTEA NOT NULL
        )
        """
    )
    # One row: the highest seq ever assigned. Its row lock is the log's write lock.
    conn.execute(
        """
        CREATE TABLE log_head (
            one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
            last_seq BIGINT NOT NULL CHECK (last_seq >= 0)
        )
        """
    )
    conn.execute("INSERT INTO log_head VALUES (TRUE, 0)")
    # The event columns of the SQLite log, with the same per-event checksum (``_integrity``:
    # the same function over the same values, so a replica's rows carry the same sums); the
    # search columns (prose, code) are derived text that only a replica's FTS index needs, so
    # the replica computes them.
    conn.execute(
        """
        CREATE TABLE conversation_history (
            seq BIGINT PRIMARY KEY CHECK (seq > 0),
            session_id TEXT NOT NULL CHECK (session_id <> ''),
            agent_id TEXT,
            run_id TEXT,
            task_id TEXT,
            step_index INTEGER,
            msg_index INTEGER,
            kind TEXT NOT NULL CHECK (kind <> ''),
            role TEXT,
            name TEXT,
            content TEXT NOT NULL DEFAULT '',
            headline TEXT,
            label TEXT,
            tool_call_id TEXT,
            tool_input TEXT,
            tool_state TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            dedup_key TEXT,
            payload_sha256 TEXT REFERENCES payloads (sha256),
            payload_size BIGINT,
            searchable BOOLEAN NOT NULL DEFAULT TRUE,
            checksum TEXT NOT NULL
        )
        """
    )
    # Reads by session and the dedup lookup are the only ones served here: ms, the paper's SQL
    # and every filter run on the replica, which keeps the SQLite log's indexes.
    conn.execute("CREATE INDEX ch_session ON conversation_history (session_id, seq)")
    conn.execute(
        "CREATE UNIQUE INDEX ch_dedup ON conversation_history (session_id, dedup_key) "
        "WHERE dedup_key IS NOT NULL"
    )
    _refuse_changes(conn)
    _advance_head_on_insert(conn)


def _refuse_changes(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        """
        CREATE FUNCTION scroll_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
        END $$
        """
    )
    for table in ("conversation_history", "payloads"):
        conn.execute(
            f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION scroll_refuse_change()"
        )
        conn.execute(
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION scroll_refuse_change()"
        )
    conn.execute(
        "CREATE TRIGGER log_head_no_delete BEFORE DELETE OR TRUNCATE ON log_head "
        "FOR EACH STATEMENT EXECUTE FUNCTION scroll_refuse_change()"
    )


def _advance_head_on_insert(conn: psycopg.Connection[Any]) -> None:
    # Per statement, not per row: one lock and one head update for a whole batch. Writers lock
    # the head row *before* choosing seqs (so they can number the batch); the trigger makes the
    # rule hold for any other INSERT too, which must then fail rather than slip a seq in below
    # rows a reader may already have seen.
    conn.execute(
        """
        CREATE FUNCTION scroll_advance_head() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            lo BIGINT;
            hi BIGINT;
            head BIGINT;
        BEGIN
            SELECT min(seq), max(seq) INTO lo, hi FROM fresh;
            IF lo IS NULL THEN
                RETURN NULL;
            END IF;
            SELECT last_seq INTO head FROM log_head FOR UPDATE;
            IF lo <= head THEN
                RAISE EXCEPTION 'seq % is not above the log head %: take the log_head row lock '
                    'and number new rows above it', lo, head;
            END IF;
            UPDATE log_head SET last_seq = hi;
            RETURN NULL;
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER conversation_history_head AFTER INSERT ON conversation_history "
        "REFERENCING NEW TABLE AS fresh FOR EACH STATEMENT EXECUTE FUNCTION scroll_advance_head()"
    )
    conn.execute(
        """
        CREATE FUNCTION scroll_head_only_rises() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.last_seq < OLD.last_seq THEN
                RAISE EXCEPTION 'log_head may only rise (from % to %)', OLD.last_seq, NEW.last_seq;
            END IF;
            RETURN NEW;
        END $$
        """
    )
    conn.execute(
        "CREATE TRIGGER log_head_rises BEFORE UPDATE ON log_head "
        "FOR EACH ROW EXECUTE FUNCTION scroll_head_only_rises()"
    )


MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_conversation_history", m001_conversation_history),
]


def pending_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """Return the names of the migrations this database has not recorded yet."""
    if conn.execute("SELECT to_regclass('_migrations')").fetchone() == (None,):
        return [name for name, _ in MIGRATIONS]
    done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
    return [name for name, _ in MIGRATIONS if name not in done]


def apply_migrations(conn: psycopg.Connection[Any]) -> list[str]:
    """Apply every migration not yet recorded (``conn`` in autocommit); return those applied."""
    applied: list[str] = []
    for name, migration in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS _migrations "
                "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            if conn.execute("SELECT 1 FROM _migrations WHERE name = %s", (name,)).fetchone():
                continue
            migration(conn)
            conn.execute("INSERT INTO _migrations (name) VALUES (%s)", (name,))
        applied.append(name)
    return applied
