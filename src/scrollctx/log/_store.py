"""The SQLite Event Log: one append-only table, global ``seq``, an FTS5 index filled per batch.

Invariants:

- Every write goes through :meth:`EventLog.append_many`, which indexes the rows it inserted in
  the same transaction (one ``INSERT … SELECT`` from the ``conversation_history_text`` view);
  there is no trigger, so a row inserted any other way would be missing from search. A store
  created without FTS5 keeps no index and the surface falls back to ``LIKE``.

- An append returns only after its transaction committed (``synchronous=FULL`` in WAL mode), so
  a killed process loses nothing it was told was written, and a batch is all-or-nothing. A
  block run as ``atomic(durable=False)`` skips that commit's fsync: still committed (a killed
  process loses nothing), on disk with the next durable commit or :meth:`EventLog.flush`.
- ``seq`` is assigned by the database and never reused; rows are never updated or deleted
  (triggers refuse it).
- Appends carrying a ``dedup_key`` are idempotent per ``(session_id, dedup_key)``: a repeat
  returns the seq of the first.
- A file that is not a healthy scrollctx store raises :class:`IntegrityError`; it is never
  replaced or "repaired" silently. Every row is verified against its checksum when read.
- A full disk fails the append as a :class:`StoreError` that says so; nothing of that batch is
  written and nothing committed before it is touched.
- A ``-wal`` deleted while the log is open is noticed at the next write: every commit the
  deleted file still holds (this connection keeps it open) is copied into the database by a
  checkpoint, and the connection is reopened on a fresh ``-wal``, before anything else is
  written. Other connections meanwhile get a :class:`StoreError` explaining it (``_failures``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from scrollctx.errors import IntegrityError, StoreError, UsageError
from scrollctx.log._check import connect_read_only
from scrollctx.log._events import Event, NewEvent
from scrollctx.log._failures import (
    SQLITE_IOERR,
    file_identity,
    known_failure,
    primary_code,
    store_error,
)
from scrollctx.log._integrity import fetch_rows, stored_checksum, verify_event
from scrollctx.log._payloads import (
    DEFAULT_THRESHOLD,
    ArtifactRef,
    PayloadStore,
    ToolResultRef,
    full_text,
    payload_ref,
)
from scrollctx.log._rows import COLUMNS, new_row, stored_row
from scrollctx.log._schema import apply_migrations, fts5_available
from scrollctx.log._text import split_prose_code

__all__ = ["EventLog"]

logger = logging.getLogger(__name__)

_INDEX_NEW_ROWS = """
INSERT INTO conversation_history_fts(rowid, prose, code, headline)
SELECT seq, prose, code, headline FROM conversation_history_text WHERE seq > ?
"""
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_STORED = (*COLUMNS, "prose", "code")
"""What an append inserts, in order; ``seq`` comes from the database, ``checksum`` last."""
_SESSION, _DEDUP_KEY = _STORED.index("session_id"), _STORED.index("dedup_key")
_INSERT = (
    f"INSERT INTO conversation_history ({', '.join(_STORED)}, checksum) "
    f"VALUES ({', '.join('?' * (len(_STORED) + 1))})"
)
_INSERT_WITH_SEQ = (
    f"INSERT INTO conversation_history (seq, {', '.join(_STORED)}, checksum) "
    f"VALUES ({', '.join('?' * (len(_STORED) + 2))})"
)


class EventLog:
    """The append-only Event Log of one store.

    Open it with :meth:`open`; use it as a context manager or call :meth:`close`. One instance
    may be shared between threads: writes are serialized by a lock, and SQLite (WAL) lets other
    processes read and append at the same time.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        payloads: PayloadStore,
        *,
        payload_threshold: int = DEFAULT_THRESHOLD,
        lock_timeout: float = 30.0,
    ) -> None:
        self._conn = conn
        self._lock_timeout = lock_timeout
        self._db_id = file_identity(path)
        self._saved_as: Path | None = None  # where the events of a replaced file were saved
        self._wal_path = path.with_name(path.name + "-wal")
        self._wal_id, self._wal_size = _identity_and_size(self._wal_path)
        self._shm_path = path.with_name(path.name + "-shm")
        self._shm_id = file_identity(self._shm_path)
        self.path = path
        self.payloads = payloads
        self.payload_threshold = payload_threshold
        self._lock = threading.RLock()
        self._depth = 0
        self.read_only = False
        row = conn.execute("SELECT value FROM _meta WHERE key = 'fts5'").fetchone()
        self.has_fts5 = bool(row and row[0] == "1")

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        payload_dir: str | Path | None = None,
        fts5: bool | None = None,
        payload_threshold: int = DEFAULT_THRESHOLD,
        verify: bool = False,
        lock_timeout: float = 30.0,
    ) -> EventLog:
        """Open (creating if needed) the Event Log at ``path``.

        Args:
            path: the SQLite file; its folder is created if missing.
            payload_dir: where externalized payloads go (default: ``payloads/`` beside the file).
            fts5: force full-text search on or off for a *new* store; ``None`` detects it.
            payload_threshold: content above this many UTF-8 bytes is externalized.
            verify: run ``PRAGMA quick_check`` before returning.
            lock_timeout: seconds to wait for another process's lock, on open and on writes.

        Raises:
            IntegrityError: the file is not a SQLite database, is corrupt, or is not a store.
            StoreError: the folder or file cannot be created or opened (a file in the way,
                no permission).
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the store folder {path.parent}: {exc.strerror or exc}; "
                "point --store at a folder you can write"
            ) from exc
        if path.is_dir():
            raise StoreError(f"{path} is a folder, not an Event Log file; move it aside")
        try:
            conn = _connect(path, lock_timeout)
        except sqlite3.OperationalError as exc:
            hint = (
                f"another process held its lock for over {lock_timeout:g} s; retry later"
                if _is_busy(exc)
                else "check that the folder and file are writable"
            )
            raise known_failure(path, "open", exc) or StoreError(
                f"cannot open {path}: {exc}; {hint}"
            ) from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database": refused untouched
            raise IntegrityError(
                f"{path} is not a usable Event Log: {exc}; move it aside to start a new store",
                path=str(path),
            ) from exc
        try:
            use_fts5 = fts5_available(conn) if fts5 is None else fts5
            apply_migrations(conn, fts5=use_fts5)
            log = cls(
                conn,
                path,
                PayloadStore(Path(payload_dir) if payload_dir else path.parent / "payloads"),
                payload_threshold=payload_threshold,
                lock_timeout=lock_timeout,
            )
            if verify:
                log.check()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise known_failure(path, "open", exc) or IntegrityError(
                f"{path} is not a usable Event Log: {exc}", path=str(path)
            ) from exc
        except BaseException:
            conn.close()
            raise
        return log

    @classmethod
    def open_read_only(cls, path: str | Path, *, payload_dir: str | Path | None = None) -> EventLog:
        """Open an existing Event Log so that nothing done through it can write the store.

        The file is opened through a ``mode=ro`` URI with ``PRAGMA query_only``: no folder or
        database is created (SQLite may add the empty ``-wal`` and ``-shm`` a reader of a WAL
        database needs, when no writer left them), no migration or journal-mode switch runs, no
        checkpoint happens, and every write (an append, an import, a transaction) raises
        :class:`StoreError` before it touches the database or the payload folder. For
        inspectors (``scroll ui``).

        Raises:
            StoreError: there is no store at ``path``, or it predates per-event checksums.
            IntegrityError: the file is not a scrollctx store.
        """
        path = Path(path)
        conn = connect_read_only(path)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA query_only = 1")
            log = cls(
                conn,
                path,
                PayloadStore(Path(payload_dir) if payload_dir else path.parent / "payloads"),
            )
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise IntegrityError(
                f"{path} is not a usable Event Log: {exc}", path=str(path)
            ) from exc
        log.read_only = True
        return log

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. The log must not be used afterwards."""
        self._conn.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check(self) -> None:
        """Run ``PRAGMA quick_check``; raise :class:`IntegrityError` on any problem."""
        rows = [r[0] for r in self._conn.execute("PRAGMA quick_check")]
        if rows != ["ok"]:
            raise IntegrityError(
                f"{self.path} failed quick_check: {'; '.join(rows[:5])}", path=str(self.path)
            )

    def atomic(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        """Run a block in one transaction; nested blocks become savepoints.

        Write events inside it with :meth:`append`/:meth:`append_many` only: a raw INSERT on
        the yielded connection would not be indexed for search. A failure to begin or commit
        the outermost transaction (another writer's lock held past ``lock_timeout``, a full
        disk) is a :class:`StoreError`; errors of the block itself propagate unchanged.

        ``durable=False`` (the outermost block decides) commits without the fsync
        (``synchronous=NORMAL`` for this one commit): the rows are committed and visible at
        once and survive the process being killed, and reach the disk with the next durable
        commit (the WAL is one file, flushed whole); an OS crash or power loss before then
        may lose them. For what can be had again, never for what a caller must keep.
        """
        return self._atomic("write") if durable else self._unflushed()

    def flush(self) -> None:
        """Make every transaction committed so far durable, ``atomic(durable=False)`` ones too.

        One fsync of the ``-wal``, which holds every commit since the last checkpoint (a
        checkpoint fsyncs what it copies into the database). The log's lock is held only to
        find the file, not while the disk works: this thread's or others' writes go on
        meanwhile (a commit that ends during the flush may or may not be covered by it).
        Commit without the flush, then flush while doing other work, and a commit is on disk
        sooner than a durable commit would have made the caller wait.

        Raises:
            StoreError: the disk refused the flush (what was committed stays committed).
        """
        with self._lock:
            self._keep_wal()  # a -wal deleted under us: its commits are copied back (fsynced)
            if self._wal_id is None:
                return  # no -wal: nothing was committed into one
            try:
                handle = os.open(self._wal_path, os.O_RDONLY)
            except FileNotFoundError:
                return  # checkpointed and removed meanwhile: on disk in the database
            found = os.fstat(handle)
            if (found.st_dev, found.st_ino) != self._wal_id:  # deleted since: copy it back
                os.close(handle)
                self._keep_wal()
                return
        try:
            os.fsync(handle)
        except OSError as exc:
            raise StoreError(f"could not flush {self._wal_path} to disk: {exc}") from exc
        finally:
            os.close(handle)

    @contextmanager
    def _unflushed(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            outermost = self._depth == 0
            if outermost:  # a safety level can only change outside a transaction
                self._conn.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._atomic("write") as conn:
                    yield conn
            finally:
                if outermost:  # a failed COMMIT was rolled back: no transaction is open
                    self._conn.execute("PRAGMA synchronous = FULL")

    @contextmanager
    def _atomic(self, action: str) -> Iterator[sqlite3.Connection]:
        self._refuse_if_read_only()
        with self._lock:
            if self._depth == 0:
                self._keep_wal()
                self._transaction("BEGIN IMMEDIATE", action)
            else:
                self._conn.execute(f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield self._conn
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._conn.execute("ROLLBACK")
                else:
                    # ROLLBACK TO leaves the savepoint open; RELEASE closes it.
                    self._conn.execute(f"ROLLBACK TO sp{self._depth}")
                    self._conn.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if self._depth == 0:
                self._transaction("COMMIT", action)
            else:
                self._conn.execute(f"RELEASE sp{self._depth}")

    def _transaction(self, statement: str, action: str) -> None:
        try:
            self._conn.execute(statement)
        except sqlite3.DatabaseError as exc:
            if self._conn.in_transaction:  # a COMMIT that failed leaves the transaction open
                self._conn.execute("ROLLBACK")
            raise store_error(self.path, action, exc) from exc

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise StoreError(
                f"{self.path} was opened read-only (EventLog.open_read_only); nothing was "
                "written. Open it with EventLog.open to write"
            )

    def _keep_wal(self) -> None:
        """Notice a ``-wal`` or ``-shm`` deleted or replaced under this open log, and go on safely.

        Called before every write transaction, so nothing new is ever committed into a deleted
        ``-wal`` (the commits it already holds stay safe while this process lives), nor under the
        locks of a deleted ``-shm``: the index of a new one is the one other processes lock, and
        two writers on two indexes overwrite each other's commits.
        """
        if file_identity(self.path) != self._db_id:
            self._refuse_replaced()
        current, size = _identity_and_size(self._wal_path)
        if current != self._wal_id and self._wal_id is not None:
            self._save_deleted_wal()
            current, size = _identity_and_size(self._wal_path)
        elif size < self._wal_size:  # the same file, shorter: checkpointed, or cut short
            self._refuse_cut_wal()
        self._wal_id, self._wal_size = current, size
        index = file_identity(self._shm_path)
        if index != self._shm_id and self._shm_id is not None:
            self._reconnect(  # which notes the index the new connection locks
                f"{self._shm_path.name} was deleted while {self.path} was open; this writer now "
                "locks the new one, as other processes do"
            )
        else:
            self._shm_id = index

    def _refuse_replaced(self) -> None:
        # The store's file was deleted, or another moved over it (a new store made at the same
        # path): this connection still reads the old file, -wal included, and writing on would
        # put events in one file and the rest of the history in another. Its events are saved
        # beside the store once, as a store of their own, and every write is refused.
        if self._saved_as is None:
            stamp = time.strftime("%Y%m%dT%H%M%S")
            prefix = f"{self.path.parent.name}.replaced-{stamp}-"  # unique: VACUUM INTO refuses
            folder = Path(tempfile.mkdtemp(prefix=prefix, dir=self.path.parent.parent))
            saved = folder / self.path.name
            self._conn.execute("VACUUM INTO ?", (str(saved),))
            self._saved_as = saved
        raise StoreError(
            f"{self.path} was replaced while this process had it open (deleted, or another file "
            "moved over it); nothing was written to the new file. The events this process "
            f"still held were saved as a store of their own: {self._saved_as.parent} (read it "
            f"with --store {self._saved_as.parent}). Reopen the store to write to the new file"
        )

    def _reconnect(self, why: str) -> None:
        self._conn.close()
        self._conn = _connect(self.path, self._lock_timeout)
        self._shm_id = file_identity(self._shm_path)  # the index the new connection locks
        logger.warning("%s: nothing was lost", why)

    def _refuse_cut_wal(self) -> None:
        # A -wal cut short in place (its inode unchanged) would take new commits past its end,
        # where no reader finds them: refuse before anything is written. SQLite itself tells
        # the two shrinks apart, under its own locks: a checkpoint that truncated the -wal reset
        # its index first, so a passive checkpoint finds nothing to do; over a cut one it meets
        # the end of the file where the index says pages are (a short read).
        try:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.OperationalError as exc:
            if primary_code(exc) != SQLITE_IOERR:
                raise store_error(self.path, "write", exc) from exc
            raise StoreError(
                f"{self._wal_path.name} was cut short while {self.path} was open: the commits "
                f"since the last checkpoint are no longer on disk ({exc}), so nothing more is "
                "written into it (those commits are lost unless a backup holds them). Stop "
                f"every process using the store, then run: scroll doctor --store "
                f"{self.path.parent}"
            ) from exc

    def _save_deleted_wal(self) -> None:
        # This connection still holds the deleted file open, with every commit since the last
        # checkpoint in it: a TRUNCATE checkpoint through it copies them all into the database
        # (fsynced). Then reopen, so later writes go to a -wal that other connections see.
        held = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
        busy, frames, copied = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy or copied < frames:
            raise StoreError(
                f"{self._wal_path.name} was deleted while {self.path} was open, and "
                f"{frames - copied} pages of recent commits could not be copied back yet: "
                "another connection is reading. Nothing was written now and nothing is lost "
                "while this process lives; close the other readers and retry"
            )
        self._reconnect(
            f"{self._wal_path.name} was deleted while {self.path} was open; the {held} pages "
            "of recent commits it held were copied into the database and a new one was started"
        )

    # -- writing ---------------------------------------------------------------------------

    def append(self, event: NewEvent) -> int:
        """Append one event durably and return its seq (the existing seq for a dedup repeat)."""
        return self.append_many([event])[0]

    def append_many(self, events: Iterable[NewEvent]) -> list[int]:
        """Append events in one transaction: all become durable, or none do."""
        self._refuse_if_read_only()  # before _prepare, which writes payload files
        rows = [self._prepare(event) for event in events]
        try:
            with self._atomic("append") as conn:
                return self._insert_batch(conn, rows)
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "append", exc) from exc

    def import_events(self, events: Sequence[Event]) -> None:
        """Insert events that already have their seqs (a store copy, a replica), atomically.

        Seqs must ascend above :meth:`last_seq`; externalized payloads must already be in
        :attr:`payloads`. Rows are stored as their source stored them (the same checksum) and
        indexed for search.
        """
        rows = []
        for event in events:
            values = _values(stored_row(event))
            rows.append((event.seq, *values, _checksum(event.seq, values)))
            if event.payload_sha256 is not None and not self.payloads.has(event.payload_sha256):
                raise UsageError(f"seq {event.seq}: put its payload before importing the row")
        try:
            with self._atomic("import") as conn:
                before = self._last_seq(conn)
                seqs = [row[0] for row in rows]
                if seqs and (seqs[0] <= before or seqs != sorted(set(seqs))):
                    raise UsageError(
                        f"imported seqs must ascend above the last seq {before} (got {seqs[0]}…)"
                    )
                conn.executemany(_INSERT_WITH_SEQ, rows)
                if self.has_fts5 and rows:
                    conn.execute(_INDEX_NEW_ROWS, (before,))
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "import", exc) from exc

    def _prepare(self, event: NewEvent) -> tuple[Any, ...]:
        return _values(new_row(event, self.payloads, self.payload_threshold))

    def _insert_batch(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[int]:
        # The write lock (BEGIN IMMEDIATE) is held, so AUTOINCREMENT hands out consecutive
        # seqs after ``before`` and no other writer can slip in: each row's checksum can cover
        # its seq before the row is inserted. Known dedup keys are looked up first: a
        # conflicting INSERT would still burn a seq, leaving gaps on every re-import.
        before = self._last_seq(conn)
        known = _existing_keys(conn, rows)
        seqs: list[int] = []
        fresh: list[tuple[Any, ...]] = []
        for row in rows:
            key = (row[_SESSION], row[_DEDUP_KEY])
            if row[_DEDUP_KEY] is not None and key in known:
                seqs.append(known[key])
                continue
            seq = before + len(fresh) + 1
            fresh.append((*row, _checksum(seq, row)))
            seqs.append(seq)
            if row[_DEDUP_KEY] is not None:
                known[key] = seq
        conn.executemany(_INSERT, fresh)
        if self._last_seq(conn) != before + len(fresh):
            raise StoreError(f"{self.path}: seqs were not assigned consecutively; nothing written")
        if self.has_fts5 and fresh:
            conn.execute(_INDEX_NEW_ROWS, (before,))
        return seqs

    @staticmethod
    def _last_seq(conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'conversation_history'"
        ).fetchone()
        return int(row[0]) if row else 0

    # -- vectors of the semantic channel ---------------------------------------------------

    def embedded_through(self, model: str) -> int:
        """Return the seq up to which every row has its ``model`` vectors (0: none yet)."""
        rows = self.execute("SELECT through_seq FROM embedding_models WHERE model = ?", (model,))
        return int(rows[0][0]) if rows else 0

    def append_embeddings(
        self, model: str, dim: int, through_seq: int, vectors: Sequence[tuple[int, int, bytes]]
    ) -> None:
        """Store ``(seq, window, vector)`` rows and move ``model``'s mark to ``through_seq``.

        One transaction: after a kill either both happened or neither, so an embedder that
        resumes from :meth:`embedded_through` never writes a vector twice.
        """
        if through_seq <= self.embedded_through(model):
            raise UsageError(
                f"{model} is already embedded through seq {self.embedded_through(model)}; "
                f"refusing to move its mark back to {through_seq}"
            )
        try:
            with self._atomic("append_embeddings") as conn:
                conn.executemany(
                    "INSERT INTO conversation_embeddings (model, seq, window, vector) "
                    "VALUES (?, ?, ?, ?)",
                    [(model, seq, window, blob) for seq, window, blob in vectors],
                )
                conn.execute(
                    "INSERT INTO embedding_models (model, dim, through_seq) VALUES (?, ?, ?) "
                    "ON CONFLICT (model) DO UPDATE SET through_seq = excluded.through_seq",
                    (model, dim, through_seq),
                )
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "append_embeddings", exc) from exc

    def merge_search_index(self) -> None:
        """Merge the full-text index into one segment (FTS5 ``optimize``).

        Every committed batch leaves FTS5 a segment of its own, and a query reads each
        segment's postings: on the BEAM stores (10-11 segments as built) a merged index makes
        ``ms.search`` 8% (60K rows) to 14% (200K) cheaper (``benchmarks/bench_merge.py``);
        the result rows do not change. Merging rewrites the whole index (about 2 s for 60K
        rows, 4-14 s for 200K on a shared disk), so ``scroll ingest`` runs it only after a
        bulk import.
        """
        if not self.has_fts5:
            return
        try:
            with self._atomic("merge"):
                self._conn.execute(
                    "INSERT INTO conversation_history_fts(conversation_history_fts) "
                    "VALUES ('optimize')"
                )
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "merge", exc) from exc

    # -- reading ---------------------------------------------------------------------------

    def get(self, seq: int) -> Event:
        """Return the event at ``seq``; raise :class:`UsageError` if there is none."""
        found = self.events([seq])
        if not found:
            raise UsageError(f"no event at seq {seq} (last seq is {self.last_seq()})")
        return found[0]

    def events(self, seqs: Sequence[int]) -> list[Event]:
        """Return the events at these seqs, in seq order; unknown seqs are skipped."""
        wanted = sorted({int(s) for s in seqs})
        found: list[Event] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found += self._select(f"seq IN ({marks})", chunk)
        return found

    def span(self, lo: int, hi: int) -> list[Event]:
        """Return every event with ``lo <= seq <= hi``, in seq order."""
        return self._select("seq BETWEEN ? AND ?", (lo, hi))

    def session_events(
        self, session_id: str, *, after_seq: int = 0, before_seq: int | None = None
    ) -> list[Event]:
        """Return one session's events after ``after_seq`` (and before ``before_seq``), in order."""
        if before_seq is None:
            return self._select("session_id = ? AND seq > ?", (session_id, after_seq))
        return self._select(
            "session_id = ? AND seq > ? AND seq < ?", (session_id, after_seq, before_seq)
        )

    def events_after(self, after_seq: int, limit: int) -> list[Event]:
        """Return up to ``limit`` events with ``seq > after_seq`` in seq order (to follow a log)."""
        return self._select("seq > ?", (after_seq,), limit=limit)

    def last_seq(self) -> int:
        """Return the highest seq ever assigned (0 for an empty log)."""
        return self._last_seq(self._conn)

    def refresh(self) -> int:
        """Return the last seq: this file is the store itself, so its readers are up to date."""
        return self.last_seq()

    def count(self) -> int:
        """Return the number of events."""
        return int(self._conn.execute("SELECT count(*) FROM conversation_history").fetchone()[0])

    def full_text(self, event: Event) -> str:
        """Return the event's whole content, reading an externalized payload if needed."""
        return full_text(event, self.payloads)

    def payload_ref(self, event: Event) -> ToolResultRef | ArtifactRef | None:
        """Return a lazy handle on the event's externalized payload, or ``None`` if inline."""
        return payload_ref(event, self.payloads)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Run a read query on the log's own connection (for trusted library code only)."""
        try:
            return list(self._conn.execute(sql, params))
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "read", exc) from exc

    def _select(self, where: str, params: Sequence[Any], *, limit: int = -1) -> list[Event]:
        sql = f"SELECT * FROM conversation_history WHERE {where} ORDER BY seq LIMIT ?"
        try:
            rows = fetch_rows(self._conn, sql, (*params, limit))
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, "read", exc) from exc
        for row in rows:
            verify_event(row, path=self.path)
        return [Event.from_row(row) for row in rows]


def _existing_keys(
    conn: sqlite3.Connection, rows: list[tuple[Any, ...]]
) -> dict[tuple[str, str], int]:
    """Return ``{(session_id, dedup_key): seq}`` for the batch's keys already in the log."""
    by_session: dict[str, list[str]] = {}
    for row in rows:
        if row[_DEDUP_KEY] is not None:
            by_session.setdefault(row[_SESSION], []).append(row[_DEDUP_KEY])
    found: dict[tuple[str, str], int] = {}
    for session_id, keys in by_session.items():
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, seq in conn.execute(
                "SELECT dedup_key, seq FROM conversation_history "
                f"WHERE session_id = ? AND dedup_key IN ({marks})",
                (session_id, *chunk),
            ):
                found[(session_id, key)] = int(seq)
    return found


def _values(row: dict[str, Any]) -> tuple[Any, ...]:
    """Return a row's values in ``_STORED`` order, with its search text split for FTS."""
    content = row["content"]
    prose, code = split_prose_code(content)
    row = {**row, "prose": "" if prose == content else prose, "code": code}
    row["searchable"] = 1 if row["searchable"] else 0
    return tuple(row[name] for name in _STORED)


def _checksum(seq: int, row: tuple[Any, ...]) -> str:
    """The checksum of a prepared row, its JSON columns as they will be stored."""
    values = dict(zip(_STORED, row, strict=True))
    values["seq"] = seq
    return stored_checksum(values)


def _identity_and_size(path: Path) -> tuple[tuple[int, int] | None, int]:
    # One stat: the write path asks both of the -wal before every transaction.
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None, 0
    return (found.st_dev, found.st_ino), found.st_size


def _connect(path: Path, lock_timeout: float) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=lock_timeout
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(lock_timeout * 1000)}")
        _reject_foreign(conn, path)  # before the WAL switch, which rewrites the file's header
        mode = _enable_wal(conn, time.monotonic() + lock_timeout)
        if str(mode).lower() != "wal":
            raise sqlite3.DatabaseError(f"could not switch {path} to WAL (journal_mode={mode})")
        conn.execute("PRAGMA synchronous = FULL")
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn: sqlite3.Connection, deadline: float) -> str:
    # Switching a new file to WAL needs an exclusive lock, and SQLite answers BUSY at once
    # instead of calling the busy handler when another process (opening the same new store)
    # holds one. Retry with backoff until the deadline; the winner's switch is then seen here.
    delay = 0.002
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _is_busy(exc: sqlite3.Error) -> bool:
    return primary_code(exc) in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _reject_foreign(conn: sqlite3.Connection, path: Path) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and "_migrations" not in tables:
        raise IntegrityError(
            f"{path} is a SQLite database but not a scrollctx store "
            f"(tables: {', '.join(sorted(tables)[:5])}); point --store at another folder",
            path=str(path),
        )
