"""The store behind the MCP server: reads through one ``ms``, writes through the Event Log.

No MCP here: the tools (:mod:`._tools`) turn these calls into tool results.

Invariants:

- every read is a call of the memory surface ``ms`` (the one implementation of search, expand,
  SQL, budgets, notes and the read-only guard); this module runs no SQL of its own. That ``ms``
  is answered by a memory reader process (:class:`~scrollctx.kernel.MemoryReader`, the one the
  kernel's ``ms`` and the agent's JSON memory tools use, under the server's sandbox policy), so
  a hostile client's query bomb costs that process, never the server: the call is an error
  saying what happened and a fresh reader answers the next one. Calls are serialized on one
  lock (a surface has one caller at a time) and each returns the notes it produced;
- a read-only server opens no writer at all: nothing it does can write the store (so it serves
  a store folder; a shared ``postgresql://`` store is served through a writer, whose local
  replica each read brings up to date first). It holds the log open read-only instead, which
  keeps the database's ``-wal`` and ``-shm`` files in place: the reader, confined to the
  store's existing files, could not create them;
- ``append`` writes only the event kinds an agent's own memory is made of (never the kinds
  Scroll keeps for itself, such as ``eviction_index`` or ``system``), and is idempotent by the
  client's key; ``ingest`` reads only regular files whose real path (symlinks resolved) lies
  inside an allow-listed folder;
- a damaged store is reported (:class:`~scrollctx.errors.IntegrityError` from the surface or the
  log), never repaired.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from scrollctx.config import Config
from scrollctx.errors import ConfigError, StoreError, UsageError
from scrollctx.ingest import ingest_path
from scrollctx.kernel import MemoryReader, SandboxPolicy, resolve_policy
from scrollctx.log import EventLog, EventStore, Kind, NewEvent, open_store
from scrollctx.surface import Budgets, MemorySurface, RemoteSurface
from scrollctx.surface._filters import Binding

__all__ = ["APPEND_KINDS", "Appended", "Memory"]

T = TypeVar("T")

APPEND_KINDS = ("note", "decision", Kind.USER_MESSAGE, Kind.MODEL_TURN, Kind.TOOL_CALL,
                Kind.TOOL_RESULT, Kind.SUMMARY)  # fmt: skip
"""The kinds a client may append: its notes, decisions, messages and tool results."""


@dataclass(frozen=True, slots=True)
class Appended:
    """Where an appended event lives; ``added`` is False when its key was already there."""

    seq: int
    session_id: str
    added: bool


class Memory:
    """One store, opened for a server's lifetime (see the module docstring).

    Args:
        config: the store (a folder, or a ``postgresql://`` URL and this host's replica).
        read_only: open no writer; :meth:`append` and :meth:`ingest` refuse.
        ingest_dirs: the folders :meth:`ingest` may read from (none: it refuses).
        sandbox: the memory reader's sandbox policy (the kernel's: strict fails closed).
    """

    def __init__(
        self,
        config: Config,
        *,
        read_only: bool = False,
        ingest_dirs: Sequence[Path] = (),
        sandbox: str | SandboxPolicy = "strict",
    ) -> None:
        self.config = config
        self.db_path = config.db_path
        self.read_only = read_only
        self.ingest_dirs = tuple(Path(d).expanduser().resolve() for d in ingest_dirs)
        self.policy = resolve_policy(sandbox)
        self.log: EventStore | None = None
        self._held: EventLog | None = None
        self.reader: MemoryReader | None = None
        self._ms: MemorySurface | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open the log (unless read-only; it is created if missing) and the surface.

        Raises:
            StoreError: read-only and there is no store at ``db_path``.
            ConfigError: read-only over a shared store (it needs a connection to stay current).
            IntegrityError: the store file is not a usable Event Log.
        """
        if self.read_only and self.config.store_url is not None:
            raise ConfigError(
                "--read-only serves a store folder; a shared postgresql:// store is served "
                "without it (its reads still go through ms, read-only)"
            )
        if self.read_only and not self.db_path.is_file():
            raise StoreError(
                f"no store at {self.db_path.parent} (no {self.db_path.name}); a --read-only "
                "server serves an existing store: import into it first (scroll ingest)"
            )
        if self.read_only:
            self._held = EventLog.open_read_only(self.db_path)
        else:
            self.log = open_store(self.config)
            self.log.refresh()  # a shared store's replica must exist before ms opens it
        unbound = Binding()  # a server reads every session, as `ms` with all_agents=True
        self.reader = MemoryReader(self.db_path.resolve(), unbound, policy=self.policy)
        self.reader.start()
        self._ms = RemoteSurface(self.reader.request, unbound, Budgets())

    def close(self) -> None:
        """Stop the memory reader and close the log."""
        self._ms = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        for log in (self.log, self._held):
            if log is not None:
                log.close()
        self.log = self._held = None

    def read(self, call: Callable[[MemorySurface], T]) -> tuple[T, list[str]]:
        """Run one ``ms`` call; return its value and the notes it produced."""
        with self._lock:
            ms, reader = self._ms, self.reader
            if ms is None or reader is None:
                raise StoreError("the store is not open (the server is shutting down)")
            if self.log is not None:
                self.log.refresh()  # a shared store: every host's newest rows first
            if reader.wait_ready() is None:
                raise StoreError(f"the store cannot be read: {reader.state}{_opt_out(reader)}")
            ms.drain_notes()
            value = call(ms)
            return value, ms.drain_notes()

    def append(
        self,
        session_id: str,
        content: str,
        *,
        kind: str = "note",
        role: str | None = None,
        name: str | None = None,
        key: str | None = None,
        headline: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Appended:
        """Append one event; a repeat of ``key`` in the session returns the first one's seq."""
        log = self._writer("scroll_append")
        if kind not in APPEND_KINDS:
            raise UsageError(
                f"kind {kind!r} cannot be appended; use one of {', '.join(APPEND_KINDS)}"
            )
        before = log.last_seq()
        seq = log.append(
            NewEvent(
                session_id=session_id,
                kind=kind,
                content=content,
                role=role,
                name=name,
                headline=headline,
                metadata=metadata or {},
                dedup_key=key,
            )
        )
        return Appended(seq, session_id, seq > before)

    def ingest(self, path: str, *, format: str = "auto") -> dict[str, Any]:
        """Import one transcript file from an allow-listed folder; return the import report."""
        log = self._writer("scroll_ingest")
        file = self._allowed_file(path)
        return asdict(ingest_path(log, file, format=format))

    def _writer(self, tool: str) -> EventStore:
        if self.log is None:
            raise UsageError(f"{tool} is refused: this server is read-only (--read-only)")
        return self.log

    def _allowed_file(self, path: str) -> Path:
        if not self.ingest_dirs:
            raise UsageError(
                "scroll_ingest is refused: no folder is allow-listed; start the server with "
                "--ingest-dir DIR to let clients import transcripts from DIR"
            )
        folders = ", ".join(map(str, self.ingest_dirs))
        real = Path(path).expanduser().resolve()
        if not any(real.is_relative_to(folder) for folder in self.ingest_dirs):
            raise UsageError(
                f"{path} is outside the folders this server may import from ({folders})"
            )
        if not real.is_file():
            raise UsageError(f"{path} is not a file in {folders}; pass one transcript file")
        return real


MCP_OPT_OUT = "the server's operator restarts it with `scroll mcp --sandbox best-effort` (or off)"
"""How a client's user opts out of a sandbox layer on this server (named in refusals)."""


def _opt_out(reader: MemoryReader) -> str:
    refused = reader.status is not None and not reader.status.holds
    return f"; to read it anyway, {MCP_OPT_OUT}" if refused else ""
