"""The PostgreSQL Event Log: one shared, append-only history that many hosts append to at once.

Open it with ``open_store("postgresql://…")`` (or ``--store``/``SCROLL_STORE``). It keeps the
SQLite log's guarantees, enforced by the database rather than by this code (``_postgres_schema``):
append-only tables, idempotent appends by ``(session_id, dedup_key)``, numbered migrations,
content-addressed payloads in the database (a team shares no file system).

Monotonic visibility — the rule every follower of the log relies on:

    A reader that has seen seq N never later finds a new row with a seq below N.

A plain sequence would break it: ``nextval`` hands 41 to one writer and 42 to another, 42
commits first, a follower reads ``seq > 40``, records 42, and never looks at 41 again. Here a
writer takes the row lock on ``log_head`` first, numbers its batch above ``log_head.last_seq``,
and holds the lock until COMMIT; the database refuses any insert at or below the head. Lock
holders are serialized and each commits before the next can number rows, so rows become
visible in seq order. Anything that follows the log by ``seq > last`` — the local replica
(``_replica``), ``scroll watch``, the proxy, the inspector — may rely on it.

Other invariants:

- Durability: every connection runs with ``synchronous_commit = on``; an append returns after
  its COMMIT, so an acknowledged event survives the server's crash (a block run as
  ``atomic(durable=False)``: once the next durable commit, :meth:`flush` or the WAL writer
  flushed it).
- No seq is consumed by a duplicate: dedup keys are looked up under the head lock, where no
  other writer can add one, and repeats get the seq of the first (a rolled-back batch consumes
  none either: the head is transactional).
- A payload is committed (in its own transaction) before the row that references it; a
  foreign key makes a dangling reference impossible.
- Every row carries the per-event checksum of ``_integrity`` (the SQLite log's function over
  the same values) and every full-row read verifies it.
- A batch whose COMMIT may or may not have happened (the connection broke during it) is
  resolved, never doubled: the retry takes the head lock — so the first attempt is over — and
  asks the server whether that attempt's transaction committed (``pg_xact_status``). Across
  processes (a writer killed mid-batch), dedup keys make the caller's retry idempotent.
- Connection loss is retried for ``retry_for`` seconds (the server restarting); then it is a
  :class:`StoreUnavailable`. Refused logins and writes are :class:`StoreAccessDenied` at once.

``path`` is the local replica (an ordinary SQLite store, ``_replica``) that ``ms`` reads;
:meth:`PostgresEventStore.refresh` brings it up to date.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from scrollctx.errors import IntegrityError, PayloadMissing, UsageError
from scrollctx.log._events import Event, NewEvent
from scrollctx.log._integrity import stored_checksum, verify_event
from scrollctx.log._payloads import (
    DEFAULT_THRESHOLD,
    ArtifactRef,
    ToolResultRef,
    full_text,
    payload_ref,
)
from scrollctx.log._postgres_errors import connect_error, describe, is_connection_loss, translate
from scrollctx.log._postgres_schema import apply_migrations, pending_migrations
from scrollctx.log._replica import Replica, SyncResult
from scrollctx.log._rows import COLUMNS, new_row, stored_row

__all__ = ["PostgresEventStore", "PostgresPayloads"]

T = TypeVar("T")
Connection = psycopg.Connection[Any]

_SELECT = f"SELECT seq, {', '.join(COLUMNS)}, checksum FROM conversation_history"
_COPY = f"COPY conversation_history (seq, {', '.join(COLUMNS)}, checksum) FROM STDIN"
_LOCK_HEAD = "SELECT last_seq FROM log_head FOR UPDATE"
_KNOWN_KEYS = """
SELECT session_id, dedup_key, seq FROM conversation_history
JOIN unnest(%s::text[], %s::text[]) AS k(session_id, dedup_key) USING (session_id, dedup_key)
"""


class PostgresPayloads:
    """Payloads in the database's ``payloads`` table, named by their sha256."""

    def __init__(self, store: PostgresEventStore) -> None:
        self._store = store

    def put(self, data: bytes) -> str:
        """Store ``data`` (committed at once, before any row refers to it); return its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        self._store._run(
            "payload write",
            lambda conn: conn.execute(
                "INSERT INTO payloads (sha256, size, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (sha256) DO NOTHING",
                (digest, len(data), data),
            ),
            own_transaction=True,
        )
        return digest

    def get(self, sha256: str, *, seq: int | None = None) -> bytes:
        """Return the payload's bytes; raise :class:`PayloadMissing` if the database has none."""
        row = self._store._run(
            "payload read",
            lambda conn: conn.execute(
                "SELECT data FROM payloads WHERE sha256 = %s", (sha256,)
            ).fetchone(),
        )
        where = f" for seq {seq}" if seq is not None else ""
        if row is None:
            raise PayloadMissing(
                f"payload {sha256[:12]}…{where} is not in {self._store.where}",
                seq=seq,
                sha256=sha256,
            )
        data = bytes(row[0])
        if hashlib.sha256(data).hexdigest() != sha256:
            raise PayloadMissing(
                f"payload {sha256[:12]}…{where} does not match its digest", seq=seq, sha256=sha256
            )
        return data

    def has(self, sha256: str) -> bool:
        """Return whether the payload with this digest is stored."""
        row = self._store._run(
            "payload read",
            lambda conn: conn.execute(
                "SELECT 1 FROM payloads WHERE sha256 = %s", (sha256,)
            ).fetchone(),
        )
        return row is not None


class PostgresEventStore:
    """The Event Log in a PostgreSQL database, with a local SQLite replica for ``ms``.

    One instance may be shared between threads: connections come from a pool, and writes are
    serialized by a lock (as in the SQLite log). Many processes and hosts may append at once.
    """

    def __init__(
        self,
        pool: ConnectionPool[Connection],
        conninfo: str,
        store_id: str,
        replica_path: Path,
        *,
        payload_threshold: int = DEFAULT_THRESHOLD,
        retry_for: float = 10.0,
        fts5: bool | None = None,
    ) -> None:
        self._pool = pool
        self.where = describe(conninfo)
        self.store_id = store_id
        self.payload_threshold = payload_threshold
        self.retry_for = retry_for
        self.payloads = PostgresPayloads(self)
        self.replica = Replica(replica_path, self, fts5=fts5)
        self.last_sync: SyncResult | None = None
        self._lock = threading.RLock()
        self._local = threading.local()

    @classmethod
    def open(
        cls,
        url: str,
        *,
        replica_path: str | Path,
        payload_threshold: int = DEFAULT_THRESHOLD,
        retry_for: float = 10.0,
        pool_size: int = 4,
        fts5: bool | None = None,
    ) -> PostgresEventStore:
        """Connect to the database at ``url``, apply pending migrations, and return the store.

        Args:
            url: a ``postgresql://`` URL (libpq conninfo; the password may come from
                ``PGPASSWORD`` or ``~/.pgpass``).
            replica_path: the local SQLite file kept as this host's replica.
            payload_threshold: content above this many UTF-8 bytes goes to ``payloads``.
            retry_for: seconds to keep retrying when the connection is lost.
            pool_size: most connections this process keeps open.
            fts5: force full-text search on or off for a *new* replica.

        Raises:
            StoreUnavailable: the server cannot be reached.
            StoreAccessDenied: the login was refused, or migrations are pending and this role
                may not apply them.
            IntegrityError: the database holds a ``conversation_history`` of something else.
            UsageError: ``url`` is not a valid PostgreSQL URL.
        """
        where = describe(url)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                _configure(conn)
                store_id = _prepare_database(conn, where)
        except psycopg.OperationalError as exc:
            if is_connection_loss(exc):
                raise connect_error(exc, url) from exc
            raise translate(exc, where, "migrate") from exc
        except psycopg.Error as exc:
            raise translate(exc, where, "migrate") from exc
        pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(2, pool_size),  # an atomic block holds one; payloads need another
            kwargs={"autocommit": True},
            configure=_configure,
            check=ConnectionPool.check_connection,
            name="scrollctx",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=retry_for)
        except PoolTimeout as exc:
            pool.close()
            raise translate(exc, where, "connect") from exc
        return cls(
            pool,
            url,
            store_id,
            Path(replica_path),
            payload_threshold=payload_threshold,
            retry_for=retry_for,
            fts5=fts5,
        )

    # -- the local file ms reads ---------------------------------------------------------

    @property
    def path(self) -> Path:
        """The local SQLite replica that ``ms`` reads (see :meth:`refresh`)."""
        return self.replica.path

    @property
    def has_fts5(self) -> bool:
        """Whether the replica has a full-text index (False: search degrades to LIKE)."""
        return self.replica.log.has_fts5

    def refresh(self) -> int:
        """Bring the replica up to date (new rows only); return its last seq."""
        self.last_sync = self.replica.sync()
        return self.last_sync.last_seq

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run a read query in SQLite's dialect on the replica, refreshed first."""
        self.refresh()
        return self.replica.log.execute(sql, params)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pool and the replica. The store must not be used afterwards."""
        self._pool.close()
        self.replica.close()

    def __enter__(self) -> PostgresEventStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check(self) -> None:
        """Check migrations and the head; raise :class:`IntegrityError` on any problem."""

        def facts(conn: Connection) -> tuple[list[str], int, int]:
            head = _scalar(conn, "SELECT last_seq FROM log_head")
            top = _scalar(conn, "SELECT coalesce(max(seq), 0) FROM conversation_history")
            return pending_migrations(conn), int(head), int(top)

        pending, head, top = self._run("check", facts)
        if pending:
            raise IntegrityError(
                f"{self.where} has migrations pending ({', '.join(pending)}); open it once "
                "with the owner role to apply them",
                path=self.where,
            )
        if head < top:
            raise IntegrityError(
                f"{self.where}: log_head ({head}) is below the highest seq ({top})",
                path=self.where,
            )

    @contextmanager
    def atomic(self, *, durable: bool = True) -> Iterator[Connection]:
        """Run a block in one transaction holding the log's write lock; nested: savepoints.

        Write events inside it with :meth:`append`/:meth:`append_many`. Errors of your own
        statements on the yielded connection propagate as psycopg raised them.
        ``durable=False`` (the outermost block decides) commits without waiting for the WAL
        flush (``synchronous_commit = off`` for this transaction): committed and visible at
        once, flushed by the next durable commit or the WAL writer; a server crash before then
        may lose it (never half of it).
        """
        with self._lock:
            held: Connection | None = getattr(self._local, "conn", None)
            if held is not None:
                with held.transaction():
                    yield held
                return
            try:
                with self._connection() as conn, conn.transaction():
                    if not durable:
                        conn.execute("SET LOCAL synchronous_commit = off")
                    conn.execute(_LOCK_HEAD)
                    self._local.conn = conn
                    try:
                        yield conn
                    finally:
                        self._local.conn = None
            except psycopg.Error as exc:
                if is_connection_loss(exc):
                    raise translate(exc, self.where, "write") from exc
                raise

    def flush(self) -> None:
        """Make every transaction committed so far durable, ``atomic(durable=False)`` ones too.

        A durable commit that locks the log's head row and writes nothing else: the lock is
        a WAL record, so the commit waits for the WAL flush up to it, past every commit before
        it (a transaction that wrote no WAL would commit without waiting).
        """
        self._commit("flush", lambda conn: None)

    # -- writing ---------------------------------------------------------------------------

    def append(self, event: NewEvent) -> int:
        """Append one event durably and return its seq (the existing seq for a dedup repeat)."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[NewEvent]) -> list[int]:
        """Append events in one transaction: all become durable, or none do."""
        rows = [new_row(event, self.payloads, self.payload_threshold) for event in events]
        if not rows:
            return []
        return self._commit("append", lambda conn: _insert_new(conn, rows))

    def import_events(self, events: Sequence[Event]) -> None:
        """Insert events that already have their seqs (a store copy), atomically.

        Seqs must ascend above :meth:`last_seq`; their payloads must already be stored.
        """
        if not events:
            return
        rows = [_numbered(event.seq, stored_row(event)) for event in events]
        seqs = [row[0] for row in rows]
        if seqs != sorted(set(seqs)):
            raise UsageError("imported seqs must be distinct and ascending")

        def insert(conn: Connection) -> None:
            head = int(_scalar(conn, _LOCK_HEAD))
            if seqs[0] <= head:
                raise UsageError(
                    f"imported seqs must ascend above the last seq {head} (got {seqs[0]}…)"
                )
            _copy_rows(conn, rows)

        self._commit("import", insert)

    # -- reading ---------------------------------------------------------------------------

    def get(self, seq: int) -> Event:
        """Return the event at ``seq``; raise :class:`UsageError` if there is none."""
        found = self.events([seq])
        if not found:
            raise UsageError(f"no event at seq {seq} (last seq is {self.last_seq()})")
        return found[0]

    def events(self, seqs: Sequence[int]) -> list[Event]:
        """Return the events at these seqs, in seq order; unknown seqs are skipped."""
        return self._select("seq = ANY(%s::bigint[])", (sorted({int(s) for s in seqs}),))

    def span(self, lo: int, hi: int) -> list[Event]:
        """Return every event with ``lo <= seq <= hi``, in seq order."""
        return self._select("seq BETWEEN %s AND %s", (lo, hi))

    def events_after(self, after_seq: int, limit: int) -> list[Event]:
        """Return up to ``limit`` events with ``seq > after_seq`` in seq order (to follow a log)."""
        return self._select("seq > %s", (after_seq,), limit=limit)

    def session_events(
        self, session_id: str, *, after_seq: int = 0, before_seq: int | None = None
    ) -> list[Event]:
        """Return one session's events after ``after_seq`` (and before ``before_seq``), in order."""
        if before_seq is None:
            return self._select("session_id = %s AND seq > %s", (session_id, after_seq))
        return self._select(
            "session_id = %s AND seq > %s AND seq < %s", (session_id, after_seq, before_seq)
        )

    def last_seq(self) -> int:
        """Return the highest seq ever assigned (0 for an empty log)."""
        return int(self._run("read", lambda conn: _scalar(conn, "SELECT last_seq FROM log_head")))

    def count(self) -> int:
        """Return the number of events."""
        return int(
            self._run(
                "read", lambda conn: _scalar(conn, "SELECT count(*) FROM conversation_history")
            )
        )

    def full_text(self, event: Event) -> str:
        """Return the event's whole content, reading an externalized payload if needed."""
        return full_text(event, self.payloads)

    def payload_ref(self, event: Event) -> ToolResultRef | ArtifactRef | None:
        """Return a lazy handle on the event's externalized payload, or ``None`` if inline."""
        return payload_ref(event, self.payloads)

    def _select(
        self, where: str, params: tuple[Any, ...], *, limit: int | None = None
    ) -> list[Event]:
        sql = f"{_SELECT} WHERE {where} ORDER BY seq" + (" LIMIT %s" if limit is not None else "")
        args = (*params, limit) if limit is not None else params

        def read(conn: Connection) -> list[Event]:
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(sql, args).fetchall()
            for row in rows:
                verify_event(row, path=self.where)
            return [Event.from_row(row) for row in rows]

        return self._run("read", read)

    # -- connections, retries, outcomes ----------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        try:
            with self._pool.connection(timeout=self.retry_for) as conn:
                yield conn
        except PoolTimeout as exc:
            raise translate(exc, self.where, "connect") from exc

    def _run(
        self, action: str, work: Callable[[Connection], T], *, own_transaction: bool = False
    ) -> T:
        """Run ``work`` on a connection, retrying it while the connection is being lost.

        Inside :meth:`atomic` (same thread) it runs on the block's connection, without retry:
        the block's earlier statements would be lost with the connection. ``work`` must be
        safe to repeat (a read, or one idempotent statement).
        """
        held: Connection | None = getattr(self._local, "conn", None)
        if held is not None and not own_transaction:
            try:
                return work(held)
            except psycopg.Error as exc:
                raise translate(exc, self.where, action) from exc
        deadline = time.monotonic() + self.retry_for
        delay = 0.05
        while True:
            try:
                with self._pool.connection(timeout=max(0.1, deadline - time.monotonic())) as conn:
                    return work(conn)
            except (psycopg.Error, PoolTimeout) as exc:
                if not is_connection_loss(exc) or time.monotonic() + delay >= deadline:
                    raise translate(exc, self.where, action) from exc
            time.sleep(delay)  # backoff while the server comes back, not a synchronization
            delay = min(delay * 2, 1.0)

    def _commit(self, action: str, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in a transaction holding the head lock; resolve an unknown COMMIT.

        Each attempt locks the head first. If an earlier attempt broke after its rows were
        written, holding the lock means that attempt is over, and ``pg_xact_status`` says
        whether it committed: if so its result stands and nothing is written twice.
        """
        with self._lock:
            held: Connection | None = getattr(self._local, "conn", None)
            if held is not None:
                return self._run(action, work)
            attempt: dict[str, Any] = {}

            def once(conn: Connection) -> T:
                with conn.transaction():
                    conn.execute(_LOCK_HEAD)
                    if attempt and _committed(conn, attempt["xid"]):
                        return attempt["result"]  # type: ignore[no-any-return]
                    attempt.clear()
                    result = work(conn)
                    xid = conn.execute("SELECT pg_current_xact_id()::text").fetchone()
                    attempt.update(xid=xid[0] if xid else None, result=result)
                return result

            return self._run(action, once)


def _configure(conn: Connection) -> None:
    # Durability on commit, whatever the server's or the role's default says. A writer whose
    # client vanished mid-transaction would hold the head lock (every writer's) until the
    # server noticed: the server ends such a session after a minute, and no wait for the lock
    # lasts longer than half of that.
    conn.execute("SET synchronous_commit = on")
    conn.execute("SET idle_in_transaction_session_timeout = '60s'")
    conn.execute("SET lock_timeout = '30s'")


def _prepare_database(conn: Connection, where: str) -> str:
    """Refuse a foreign ``conversation_history``, apply pending migrations, return the store id."""
    pending = pending_migrations(conn)
    if "m001_conversation_history" in pending:
        found = conn.execute("SELECT to_regclass('conversation_history')").fetchone()
        if found is not None and found[0] is not None:
            raise IntegrityError(
                f"{where} already has a conversation_history table that scrollctx did not "
                "create; use another database (or schema, via ?options=-csearch_path=…)",
                path=where,
            )
    if pending:
        apply_migrations(conn)
    row = conn.execute("SELECT value FROM _meta WHERE key = 'store_id'").fetchone()
    if row is None:
        raise IntegrityError(f"{where} has no store_id in _meta", path=where)
    return str(row[0])


def _committed(conn: Connection, xid: str | None) -> bool:
    if xid is None:
        return False
    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
    return row is not None and row[0] == "committed"


def _insert_new(conn: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Number ``rows`` above the (locked) head, skipping dedup repeats; return every seq."""
    head = int(_scalar(conn, _LOCK_HEAD))
    known = _known_keys(conn, rows)
    seqs: list[int] = []
    fresh: list[tuple[Any, ...]] = []
    for row in rows:
        key = (row["session_id"], row["dedup_key"])
        if row["dedup_key"] is not None and key in known:
            seqs.append(known[key])
            continue
        seq = head + len(fresh) + 1
        fresh.append(_numbered(seq, row))
        seqs.append(seq)
        if row["dedup_key"] is not None:
            known[key] = seq
    _copy_rows(conn, fresh)
    return seqs


def _known_keys(conn: Connection, rows: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    keyed = [(row["session_id"], row["dedup_key"]) for row in rows if row["dedup_key"] is not None]
    if not keyed:
        return {}
    sessions, keys = [k[0] for k in keyed], [k[1] for k in keyed]
    found = conn.execute(_KNOWN_KEYS, (sessions, keys)).fetchall()
    return {(session, key): int(seq) for session, key, seq in found}


def _copy_rows(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """COPY rows (``seq`` first, then ``COLUMNS``) in; the head trigger fires once for them."""
    if not rows:
        return
    with conn.cursor() as cur, cur.copy(_COPY) as copy:
        for row in rows:
            copy.write_row(row)


def _numbered(seq: int, row: dict[str, Any]) -> tuple[Any, ...]:
    """Return the COPY values of ``row`` at ``seq``: seq, ``COLUMNS``, then its checksum."""
    return (seq, *(row[name] for name in COLUMNS), stored_checksum({**row, "seq": seq}))


def _scalar(conn: Connection, sql: str) -> Any:
    """Return the one value ``sql`` selects (a store missing it is damaged)."""
    row = conn.execute(sql).fetchone()
    if row is None:
        raise IntegrityError(f"the store's database answered nothing to {sql!r}")
    return row[0]
