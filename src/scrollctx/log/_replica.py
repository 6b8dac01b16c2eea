"""A local SQLite replica of a shared Event Log, brought up to date by seq.

``ms`` (the memory surface) reads SQLite: the paper's SQL (``json_extract``,
``hist.conversation_history``), FTS5 ranking and the kernel's read-only sandbox all assume one
local file. So each host keeps one: an ordinary SQLite Event Log (the same schema, the same
FTS index, payload files in ``payloads/`` beside it) whose rows are the shared log's rows with
their seqs unchanged. :func:`~scrollctx.surface.open_surface` opens it like any store.

How :meth:`Replica.sync` works:

1. Open the file, or create it. The replica folder belongs to scrollctx: a file there that is
   damaged (fails to open as a store) is deleted and rebuilt from scratch, with a warning,
   since it is a cache of the shared log, which is intact. A healthy store that holds events
   but no replica marker was put there by hand: refused, never deleted.
2. If the file replicates another log (its ``replica_of`` is not the source's ``store_id``),
   rebuild it.
3. Copy pages of ``seq > last`` in seq order: payloads first (content-addressed files), then
   the rows in one SQLite transaction per page, indexed for search in that transaction. Each
   page is read from ``last`` itself, and the replica's last row must equal the source's row
   at that seq; if the source has no such row or another one (it was restored from an older
   backup, then written again), the replica is rebuilt, never left holding rows the source
   lost. The cost is proportional to the new rows; a sync with nothing new is one query to
   the source.

Why ``seq > last`` never misses a row: the source guarantees monotonic visibility (a reader
that has seen seq N never later finds a new row below N; see ``_postgres``), so everything
below the replica's last seq is already in it. Two processes syncing one replica take turns
on SQLite's write lock and re-read ``last`` inside it, so neither imports a row twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scrollctx.errors import IntegrityError, PayloadMissing
from scrollctx.log._events import Event
from scrollctx.log._payloads import Payloads
from scrollctx.log._store import EventLog

__all__ = ["PAGE_ROWS", "Replica", "ReplicaSource", "SyncResult"]

PAGE_ROWS = 2000
"""Rows fetched and committed per step of a sync."""

_MARKER = "replica_of"
_log = logging.getLogger(__name__)


class ReplicaSource(Protocol):
    """What a replica reads from the shared log."""

    @property
    def store_id(self) -> str: ...
    @property
    def payloads(self) -> Payloads: ...
    def last_seq(self) -> int: ...
    def events_after(self, after_seq: int, limit: int) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one sync did: the replica's last seq after it, rows added, and any rebuild."""

    last_seq: int
    added: int
    rebuilt: str | None = None
    """Why the replica was rebuilt from scratch (None: it was not)."""


class Replica:
    """The SQLite file at ``path`` kept equal to a prefix of ``source``, by seq."""

    def __init__(self, path: Path, source: ReplicaSource, *, fts5: bool | None = None) -> None:
        self.path = path
        self.source = source
        self._fts5 = fts5
        self._log: EventLog | None = None

    @property
    def log(self) -> EventLog:
        """The replica's SQLite Event Log, opened (or rebuilt) on first use."""
        if self._log is None:
            self._log, _ = self._open()
        return self._log

    def sync(self) -> SyncResult:
        """Bring the replica up to the source's newest committed seq."""
        rebuilt: str | None = None
        if self._log is None:
            self._log, rebuilt = self._open()
        try:
            added = self._copy_new()
        except _Diverged as exc:
            rebuilt = str(exc)
            self._rebuild(rebuilt)
            added = self._copy_new()
        except IntegrityError as exc:  # the file was damaged while in use
            if exc.path not in (None, str(self.path)):
                raise  # a damaged row of the source: rebuilding would copy it again
            rebuilt = f"it was damaged ({exc})"
            self._rebuild(rebuilt)
            added = self._copy_new()
        return SyncResult(self.log.last_seq(), added, rebuilt)

    def restore_payloads(self) -> int:
        """Fetch again from the source each payload file of the replica that is gone or damaged.

        Payload files outlive rebuilds (they are named by their digest) and a sync fetches only
        the new rows' payloads, so nothing else mends one; ``scroll doctor`` calls this. Returns
        how many files were restored.
        """
        payloads = self.log.payloads
        restored = 0
        for row in self.log.execute(
            "SELECT DISTINCT payload_sha256 FROM conversation_history "
            "WHERE payload_sha256 IS NOT NULL"
        ):
            sha = str(row[0])
            try:
                payloads.get(sha)
            except PayloadMissing:
                payloads.path_for(sha).unlink(missing_ok=True)
                payloads.put(self.source.payloads.get(sha))
                restored += 1
        return restored

    def lag(self) -> int:
        """Return how many seqs the replica is behind the source (without syncing)."""
        return max(0, self.source.last_seq() - self.log.last_seq())

    def close(self) -> None:
        """Close the replica's file."""
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- steps ---------------------------------------------------------------------------

    def _copy_new(self) -> int:
        added = 0
        while True:
            page = self._copy_page()
            added += page
            if page < PAGE_ROWS:
                return added

    def _copy_page(self) -> int:
        log = self.log
        with log.atomic():
            # Inside the write lock: another process may have synced meanwhile.
            last = log.last_seq()
            events = self.source.events_after(max(last - 1, 0), PAGE_ROWS + 1)
            if last:
                if not events or events[0].seq != last or log.events([last]) != events[:1]:
                    raise _Diverged(
                        f"its event at seq {last} is not the source's (the source was restored "
                        "from an older backup, or the file is ahead of it)"
                    )
                events = events[1:]
            for event in events:
                sha = event.payload_sha256
                if sha is not None and not log.payloads.has(sha):
                    log.payloads.put(self.source.payloads.get(sha, seq=event.seq))
            log.import_events(events)
        return len(events)

    def _open(self) -> tuple[EventLog, str | None]:
        try:
            log = EventLog.open(self.path, fts5=self._fts5)
        except IntegrityError as exc:
            reason = f"it was damaged ({exc})"
            self._delete_files(reason)
            return self._claim(EventLog.open(self.path, fts5=self._fts5)), reason
        marker = _marker(log)
        if marker == self.source.store_id:
            return log, None
        if marker is None and log.count() == 0:
            return self._claim(log), None
        if marker is None:
            log.close()
            raise IntegrityError(
                f"{self.path} holds events but is not a replica; it would be overwritten, so "
                "move it aside (or point the replica folder elsewhere)",
                path=str(self.path),
            )
        log.close()
        reason = f"it replicated another store ({marker})"
        self._delete_files(reason)
        return self._claim(EventLog.open(self.path, fts5=self._fts5)), reason

    def _rebuild(self, reason: str) -> None:
        self.close()
        self._delete_files(reason)
        self._log = self._claim(EventLog.open(self.path, fts5=self._fts5))

    def _claim(self, log: EventLog) -> EventLog:
        with log.atomic() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO _meta(key, value) VALUES (?, ?)",
                (_MARKER, self.source.store_id),
            )
        return log

    def _delete_files(self, reason: str) -> None:
        # Payload files stay: they are named by their digest, so they are right for any log.
        _log.warning("rebuilding the replica %s from scratch: %s", self.path, reason)
        for suffix in ("", "-wal", "-shm", "-journal"):
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)


class _Diverged(Exception):
    """The replica holds a row the source does not (the message says which)."""


def _marker(log: EventLog) -> str | None:
    rows = log.execute("SELECT value FROM _meta WHERE key = ?", (_MARKER,))
    return str(rows[0][0]) if rows else None
