"""Helpers of the storage suite: the two backends, an event maker, FTS index checks."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.log import EventLog, EventStore, Kind, NewEvent


@dataclass
class Backend:
    """How one backend is opened and inspected from outside."""

    name: str
    open: Callable[[], EventStore]
    raw: Callable[[str], Any]
    """Run one statement on an independent connection and return its rows."""
    db_error: type[BaseException] | tuple[type[BaseException], ...]
    """What the backend's driver raises for a statement the database refuses."""


def sqlite_backend(folder: Path) -> Backend:
    path = folder / "history.db"

    def raw(sql: str) -> Any:
        conn = sqlite3.connect(path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    return Backend("sqlite", lambda: EventLog.open(path), raw, sqlite3.DatabaseError)


def postgres_backend(url: str, folder: Path) -> Backend:
    import psycopg

    from scrollctx.log._postgres import PostgresEventStore

    def raw(sql: str) -> Any:
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def open_store() -> EventStore:
        return PostgresEventStore.open(url, replica_path=folder / "replica" / "history.db")

    return Backend("postgresql", open_store, raw, psycopg.Error)


def turn(text: str, *, key: str | None = None, session: str = "s1", **extra: object) -> NewEvent:
    return NewEvent(
        session_id=session,
        kind=Kind.USER_MESSAGE,
        role="user",
        content=text,
        dedup_key=key,
        **extra,
    )  # type: ignore[arg-type]


def index_matches_the_rows(store: EventStore) -> None:
    """Fail unless the FTS index holds exactly the searchable rows of the file ``ms`` reads."""
    # rank=1 makes FTS5 compare its index with the content view itself: a searchable row
    # missing from the index (or an entry without its row) fails as "malformed".
    store.execute(
        "INSERT INTO conversation_history_fts(conversation_history_fts, rank) "
        "VALUES ('integrity-check', 1)"
    )


def matches(store: EventStore, term: str) -> list[int]:
    """Return the seqs whose indexed text matches ``term``."""
    rows = store.execute(
        "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? "
        "ORDER BY rowid",
        (term,),
    )
    return [r[0] for r in rows]
