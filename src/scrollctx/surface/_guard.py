"""The read-only connection behind ``ms``, its SQLite authorizer and its time budget.

Invariants:

- The Event Log is never opened read-write here. The surface's own connection has an in-memory
  ``main`` database; the log is ATTACHed as ``hist`` through a ``mode=ro`` URI, then
  ``PRAGMA query_only`` is set, then the authorizer is installed. Three layers, each enough alone
  to refuse a write to ``hist``; in the kernel, Landlock adds a fourth.
- The authorizer denies INSERT/UPDATE/DELETE on ``hist`` and ``temp``, every DDL action, ATTACH
  and DETACH (which also refuses ``VACUUM INTO``, as SQLite attaches the target first), writing
  or unknown pragmas, and ``load_extension``. Reads, read pragmas and the functions SQLite and
  FTS5 need (``json_extract``, ``snippet``, ``bm25`` …) stay allowed.
- Every statement runs under a deadline enforced by a progress handler; an expired deadline
  surfaces as :class:`BudgetExceeded`, never as a silent short answer.
- Nothing is written to disk: temporary tables and sorts stay in memory (``temp_store``), where
  a confined process's heap limit bounds them; ``value_bytes`` caps one string or blob.
"""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scrollctx.errors import IntegrityError, StoreError
from scrollctx.log import known_failure, needs_upgrade

__all__ = ["BudgetExceeded", "Deadline", "connect_read_only"]

_PROGRESS_OPS = 2000

_DDL = frozenset(
    {
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_TEMP_INDEX,
        sqlite3.SQLITE_CREATE_TEMP_TABLE,
        sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
        sqlite3.SQLITE_CREATE_TEMP_VIEW,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_TEMP_INDEX,
        sqlite3.SQLITE_DROP_TEMP_TABLE,
        sqlite3.SQLITE_DROP_TEMP_TRIGGER,
        sqlite3.SQLITE_DROP_TEMP_VIEW,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_ALTER_TABLE,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_ANALYZE,
        sqlite3.SQLITE_CREATE_VTABLE,
        sqlite3.SQLITE_DROP_VTABLE,
    }
)
_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE})

# Pragmas that only read. Those in _PRAGMAS_WITH_ARG take an object name as argument; any
# other pragma given a value (``journal_mode=delete``, ``query_only=0``) is a write.
_READ_PRAGMAS = frozenset(
    {
        "application_id", "collation_list", "compile_options", "data_version", "database_list",
        "encoding", "foreign_key_list", "foreign_keys", "freelist_count", "function_list",
        "index_info", "index_list", "index_xinfo", "journal_mode", "module_list", "page_count",
        "page_size", "pragma_list", "query_only", "schema_version", "table_info", "table_list",
        "table_xinfo", "user_version",
    }
)  # fmt: skip
_PRAGMAS_WITH_ARG = frozenset(
    {"foreign_key_list", "index_info", "index_list", "index_xinfo", "table_info", "table_list",
     "table_xinfo"}
)  # fmt: skip
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile"})


class BudgetExceeded(Exception):
    """The statement ran past the surface's time budget (internal; callers turn it into a note)."""


class Deadline:
    """A per-call time budget, checked by SQLite's progress handler.

    A *checkpoint* (``at``, ``go_on``) asks once, when the running statement passes ``at``,
    whether the call may go on: ``go_on()`` returns False to end it there as if its budget had
    run out, and then :attr:`cut` ends every later statement of the call at its first progress
    check too, until its owner resets it (``go_on`` may also move :attr:`expires_at`). A call
    answered ahead of its request (:mod:`scrollctx.kernel._reader`) uses it to give up early
    unless the request has come.
    """

    def __init__(self) -> None:
        self.expires_at: float | None = None
        self.expired = False
        self.interrupt: BaseException | None = None
        self.checkpoint: tuple[float, Callable[[], bool]] | None = None
        self.cut = False
        """Whether a checkpoint said no (not reset by :meth:`running`: a call may run many)."""

    def __call__(self) -> int:
        try:
            if self.expires_at is None:
                return 0
            now, checkpoint = time.monotonic(), self.checkpoint
            if checkpoint is not None and now >= checkpoint[0]:
                self.checkpoint = None
                self.cut = not checkpoint[1]()
            if self.cut:
                self.expired = True
                return 1
            if now > self.expires_at:
                self.expired = True
                return 1
        except BaseException as exc:  # noqa: BLE001 - a Ctrl-C in the handler must not be lost
            self.interrupt = exc
            return 1
        return 0

    @contextmanager
    def running(self, seconds: float) -> Iterator[None]:
        """Arm the deadline for one call; re-raise an interrupt that arrived inside SQLite."""
        self.expires_at = time.monotonic() + seconds
        self.expired = False
        self.interrupt = None
        try:
            yield
        finally:
            self.expires_at = None
            if self.interrupt is not None:
                raise self.interrupt


def _authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, _: object) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) or action in _DDL:
        return sqlite3.SQLITE_DENY
    if action in _WRITES:
        # FTS5 declares its virtual table through an internal sqlite_master update on main;
        # main is an empty in-memory database, so that is the one write let through.
        if db == "main" and arg1 == "sqlite_master":
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name not in _READ_PRAGMAS:
            return sqlite3.SQLITE_DENY
        if arg2 is not None and name not in _PRAGMAS_WITH_ARG:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def read_only_uri(db_path: Path) -> str:
    """Return the ``file:`` URI that opens ``db_path`` read-only."""
    return file_uri(db_path, "ro")


def file_uri(db_path: Path, mode: str) -> str:
    """Return the ``file:`` URI that opens ``db_path`` in SQLite's ``mode`` (``ro``, ``rw``:
    neither creates a missing file)."""
    return "file:" + urllib.parse.quote(str(db_path.resolve())) + f"?mode={mode}"


def connect_read_only(
    db_path: Path, deadline: Deadline, *, value_bytes: int | None = None
) -> sqlite3.Connection:
    """Open the guarded connection: in-memory main, the log ATTACHed read-only as ``hist``.

    ``value_bytes``: the largest string or blob a statement may build (``SQLITE_LIMIT_LENGTH``;
    default SQLite's own, 1e9 bytes); past it a statement fails at once with "string or blob
    too big" instead of allocating.

    Raises:
        StoreError: the file is missing or cannot be attached read-only.
        IntegrityError: the file is not a SQLite database, or not a scrollctx store.
    """
    if not db_path.is_file():
        raise StoreError(f"no Event Log at {db_path}; run `scroll ingest` or start a session first")
    # uri=True so the ATTACH below honours ``?mode=ro`` instead of naming a file "file:…".
    conn = sqlite3.connect(
        "file::memory:", uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
    )
    try:
        conn.execute("ATTACH DATABASE ? AS hist", (read_only_uri(db_path),))
        tables = {row[0] for row in conn.execute("SELECT name FROM hist.sqlite_master")}
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA temp_store = MEMORY")
    except sqlite3.DatabaseError as exc:
        conn.close()
        failure = known_failure(db_path, "opening read-only", exc)
        if failure is not None and not isinstance(failure, IntegrityError):
            raise failure from exc
        if isinstance(exc, sqlite3.OperationalError):
            raise StoreError(f"cannot open {db_path} read-only: {exc}") from exc
        raise IntegrityError(
            f"{db_path} is not a usable Event Log: {exc}", path=str(db_path)
        ) from exc
    if not {"conversation_history", "_meta"} <= tables:
        conn.close()
        raise IntegrityError(
            f"{db_path} is a SQLite database but not a scrollctx store (no conversation_history); "
            "point --store at another folder",
            path=str(db_path),
        )
    columns = {row[1] for row in conn.execute("PRAGMA hist.table_info(conversation_history)")}
    if "checksum" not in columns:
        conn.close()
        raise StoreError(needs_upgrade(db_path))
    if value_bytes is not None:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_bytes)
    conn.set_authorizer(_authorize)
    conn.set_progress_handler(deadline, _PROGRESS_OPS)
    return conn
