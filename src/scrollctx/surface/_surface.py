"""``ms``: the memory surface the model's code calls to read its own lossless history.

The docstrings of the public methods are shown to the model (``ms.help()``): each is exact,
short, and carries one example.

Invariants:

- Read-only, always: the Event Log is ATTACHed ``mode=ro`` as ``hist`` behind an authorizer
  (see ``_guard``); no public attribute exposes the connection.
- Every call runs under the time, row and byte :class:`Budgets`; a cut result is ``partial``
  and says which budget cut it and how to narrow.
- Notes of every result also collect in the surface until :meth:`MemorySurface.drain_notes`,
  so the kernel can print them after each cell as ``[note] …`` lines.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from scrollctx.errors import IntegrityError, PayloadMissing, QueryError
from scrollctx.log import (
    CHECKSUM_COLUMNS,
    PayloadStore,
    fetch_rows,
    is_undecodable,
    known_failure,
    tolerant_text,
    verify_event,
)
from scrollctx.surface._dates import days_between as _days_between
from scrollctx.surface._filters import Binding, build_filters, clamp_int64
from scrollctx.surface._guard import Deadline, connect_read_only
from scrollctx.surface._rows import Budgets, ResultRows, as_dict, load_json, row_bytes
from scrollctx.surface._search import Searcher, SearchOptions

__all__ = [
    "MemorySurface",
    "call_deadline",
    "open_surface",
    "recall",
    "remembered",
    "store_version",
]

_FULL_COLUMNS = """
    c.seq, c.session_id, c.agent_id, c.run_id, c.task_id, c.step_index, c.msg_index, c.kind,
    c.role, c.name, c.created_at,
    COALESCE(json_extract(c.metadata, '$.date'), substr(c.created_at, 1, 10)) AS date,
    c.headline, c.label, c.content, c.tool_call_id, c.tool_input, c.tool_state, c.metadata,
    c.payload_sha256, c.payload_size, c.dedup_key, c.searchable, c.checksum
"""
_CHECKED_ONLY = ("dedup_key", "searchable", "checksum")  # read to verify a row, not returned
_CHECK_SQL = (
    f"SELECT {', '.join(CHECKSUM_COLUMNS)}, checksum FROM hist.conversation_history "
    "WHERE seq IN (SELECT value FROM json_each(?))"
)
_STORED_AT = "stored_at"

_READ_STATEMENT = re.compile(r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*(\w+)", re.DOTALL)
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB: the file, not the query
_TOOBIG = 18
_READ_KEYWORDS = frozenset({"select", "with", "values", "explain", "pragma"})
_WRITE_KEYWORDS = frozenset(
    {"insert", "update", "delete", "replace", "upsert", "create", "drop", "alter", "attach",
     "detach", "vacuum", "reindex", "analyze", "begin", "commit", "end", "rollback",
     "savepoint", "release"}
)  # fmt: skip
_LOG_TABLE = "conversation_history"
_TABLE = f"hist.{_LOG_TABLE}"
_PUBLIC = (
    "search", "expand", "sql_query", "sessions", "session", "recall_tool", "index",
    "days_between", "drain_notes", "help",
)  # fmt: skip
_SQL_CAP_NOTE = (
    "{what} hit the {cap}-row cap -- matching rows beyond the first {cap} were NOT returned; "
    "narrow with WHERE or page with LIMIT/OFFSET"
)


def open_surface(
    db_path: str | Path,
    *,
    session_id: str | None = None,
    task_id: str | None = None,
    agent_id: str | None = None,
    budgets: Budgets | None = None,
    value_bytes: int | None = None,
) -> MemorySurface:
    """Open the memory surface over the Event Log at ``db_path``, read-only.

    Payloads are read from ``payloads/`` beside the file. ``value_bytes`` caps one string or
    blob a query may build (default: SQLite's limit). Raises :class:`StoreError` if the file
    does not exist (it is never created here).
    """
    path = Path(db_path)
    binding = Binding(session_id, task_id, agent_id)
    return MemorySurface(path, binding, budgets or Budgets(), value_bytes=value_bytes)


class MemorySurface:
    """Read-only access to the Event Log for model-written code, bound as ``ms``."""

    __slots__ = ("_budgets", "_binding", "_conn", "_db_path", "_deadline", "_notes",
                 "_payloads", "_searcher")  # fmt: skip

    def __init__(
        self, db_path: Path, binding: Binding, budgets: Budgets, *, value_bytes: int | None = None
    ) -> None:
        self._binding = binding
        self._budgets = budgets
        self._deadline = Deadline()
        self._db_path = db_path
        self._conn = connect_read_only(db_path, self._deadline, value_bytes=value_bytes)
        self._payloads = PayloadStore(db_path.parent / "payloads")
        self._notes: list[str] = []
        self._searcher = Searcher(self._conn, self._deadline, budgets, _has_fts5(self._conn))

    # -- binding ---------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The session this surface is bound to (None: not bound)."""
        return self._binding.session_id

    @property
    def task_id(self) -> str | None:
        """The task this surface is bound to (None: not bound)."""
        return self._binding.task_id

    @property
    def agent_id(self) -> str | None:
        """The agent this surface is bound to (None: not bound)."""
        return self._binding.agent_id

    @property
    def budgets(self) -> Budgets:
        """The per-call time, row and byte budgets."""
        return self._budgets

    @property
    def has_fts5(self) -> bool:
        """Whether the store has a full-text index (False: search degrades to LIKE)."""
        return self._searcher.has_fts5

    def close(self) -> None:
        """Close the surface's connection (and the semantic channel's worker thread)."""
        self._searcher.close()
        self._conn.close()

    def __enter__(self) -> MemorySurface:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<ms session_id={self.session_id!r} task_id={self.task_id!r} "
            f"agent_id={self.agent_id!r}; ms.help() lists the calls>"
        )

    # -- the model's calls -----------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        kind: str | list[str] | None = None,
        role: str | list[str] | None = None,
        scope: str = "all",
        all_agents: bool = False,
        session_id: str | None = None,
        seq_range: tuple[int | None, int | None] | None = None,
        step_range: tuple[int | None, int | None] | None = None,
        created_from: str | None = None,
        created_to: str | None = None,
        snippet: bool = True,
        chars: int | None = 300,
        mode: str | None = None,
    ) -> ResultRows:
        """Search the history; best first. Returns up to k hit dicts.

        Query: words are AND-combined; uppercase OR / AND / NOT are operators (OR binds
        tighter: `a b OR c` = a AND (b OR c)); "exact phrase"; prefix*. Anything else is
        literal text. If the AND pass finds fewer than k, an OR pass over the content words
        fills up: plain words are then all ranked by BM25 together, while AND hits of a query
        with operators or "phrases" stay first. Rows only the OR pass found carry
        broadened=True (leads to verify).
        mode: 'bm25' (words only), 'semantic' (meaning: nearest rows by embedding, finds
        paraphrases), 'hybrid' (both, fused). Default: hybrid when the store has vectors
        (`scroll embed`), else bm25; asking for semantic/hybrid without vectors gives a
        note and BM25 hits.
        Hit keys: seq, session_id, step_index, msg_index, kind, role, created_at, date,
        headline, snippet («match» in context), content (first `chars` chars; chars=None for
        all), metadata, broadened, channel ('bm25', 'semantic' or 'both': who found it).
        Filters (inclusive): kind, role (str or list), session_id, seq_range=(lo, hi),
        step_range=(lo, hi), created_from / created_to (ISO dates). scope='session' or 'task'
        limits to the bound session/task (the whole store when none is bound); all_agents=True
        includes other agents' rows.

        Example: hits = ms.search("pamela vendor", k=10, role="user", seq_range=(100, 900))
                 ideas = ms.search("what food does she dislike", mode="semantic")
        """
        filters = build_filters(
            self._binding,
            kind=kind,
            role=role,
            scope=scope,
            all_agents=all_agents,
            session_id=session_id,
            seq_range=seq_range,
            step_range=step_range,
            created_from=created_from,
            created_to=created_to,
        )
        options = SearchOptions(k, bool(snippet), chars, mode)
        try:
            hits = self._searcher.search(query, filters, options)
        except sqlite3.DatabaseError as exc:  # a damaged file or full-text index, too
            if not is_undecodable(exc):
                failure = known_failure(self._db_path, "search", exc)
                if failure is None:
                    raise
                raise failure from exc
            with tolerant_text(self._conn):  # a damaged row: find it, so _verify names it
                hits = self._searcher.search(query, filters, options)
        self._verify([hit["seq"] for hit in hits])
        return self._keep(hits)

    def expand(self, first: object, last: int | None = None) -> ResultRows:
        """Return full rows (whole content, large payloads read back) in seq order.

        Accepts a seq, a list of seqs, search hits (uses their seq), or a span lo, hi
        (inclusive). Unknown seqs are listed in a note; a payload file that is gone is flagged
        with payload_missing=True and a note (content is then only the stored preview).

        Example: rows = ms.expand([812, 815]); span = ms.expand(800, 830); ms.expand(hits[:3])
        """
        if last is not None:
            return self._keep(self._expand_span(first, last))
        seqs = _seqs_of(first)
        rows = self._select_rows(
            "c.seq IN (SELECT value FROM json_each(?))", (_json_list(seqs),), "expand"
        )
        missing = sorted(set(seqs) - {row["seq"] for row in rows})
        if missing and not rows.partial:
            shown = ", ".join(map(str, missing[:20])) + (" …" if len(missing) > 20 else "")
            rows.note(f"expand: no event at seq {shown}")
        return self._keep(rows)

    def sql_query(
        self, sql: str, params: Iterable[Any] | Mapping[str, Any] | None = None
    ) -> ResultRows:
        """Run one read-only SQL statement; return rows as dicts (at most 1000).

        Tables: hist.conversation_history (seq, session_id, agent_id, run_id, task_id,
        step_index, msg_index, kind, role, name, content, headline, label, tool_call_id,
        tool_input, tool_state, metadata JSON, created_at ISO, payload_sha256, payload_size)
        and hist.conversation_history_fts. Bind values with ? and params. More than 1000
        rows: the first 1000 come back, rows.truncated is True and a note says so -- page
        with LIMIT/OFFSET.

        Example: ms.sql_query("SELECT seq, role, content FROM hist.conversation_history
        WHERE step_index = ? ORDER BY seq LIMIT 50", (3,))
        """
        return self._keep(self._sql(sql, params))

    def sessions(self, *, all_agents: bool = False) -> ResultRows:
        """List sessions, oldest first: session_id, task_id, events, first_seq, last_seq,
        first_created_at, last_created_at, first_step, last_step.

        Example: for s in ms.sessions(): print(s["session_id"], s["events"], s["first_seq"])
        """
        filters = build_filters(self._binding, all_agents=all_agents)
        sql = (
            "SELECT c.session_id, min(c.task_id) AS task_id, count(*) AS events, "
            "min(c.seq) AS first_seq, max(c.seq) AS last_seq, "
            "min(c.created_at) AS first_created_at, max(c.created_at) AS last_created_at, "
            "min(c.step_index) AS first_step, max(c.step_index) AS last_step "
            f"FROM hist.conversation_history AS c WHERE {filters.sql} "
            "GROUP BY c.session_id ORDER BY first_seq"
        )
        return self._keep(self._sql(sql, filters.params, what="sessions"))

    def session(self, session_id: str | None = None, *, after_seq: int = 0) -> ResultRows:
        """Return one session's rows oldest first, full content (default: the bound session).

        At most the row budget (1000) per call; a longer session comes back partial with a
        note -- continue with after_seq=<last seq you got>.

        Example: rows = ms.session("beam:100K/1:b3")
                 more = ms.session("beam:100K/1:b3", after_seq=rows[-1]["seq"])
        """
        sid = session_id if session_id is not None else self.session_id
        if sid is None:
            raise QueryError(
                "no session is bound; pass one: ms.session('<session_id>') "
                "(ms.sessions() lists them)"
            )
        if isinstance(after_seq, bool) or not isinstance(after_seq, int):
            raise QueryError(f"after_seq must be an integer seq; got {after_seq!r}")
        rows = self._select_rows(
            "c.session_id = ? AND c.seq > ?", (str(sid), clamp_int64(after_seq)), f"session {sid!r}"
        )
        if not rows and not rows.partial:
            rows.note(f"session {sid!r} has no events after seq {after_seq}")
        return self._keep(rows)

    def recall_tool(self, tool_call_id: str) -> ResultRows:
        """Return a tool call and its result rows (full payloads), in seq order.

        Example: call, result = ms.recall_tool("call_7f3a")[:2]; print(result["content"][:500])
        """
        rows = self._select_rows("c.tool_call_id = ?", (str(tool_call_id),), "recall_tool")
        if not rows and not rows.partial:
            rows.note(f"no events with tool_call_id {tool_call_id!r}")
        return self._keep(rows)

    def index(self, session_id: str | None = None) -> dict[str, Any]:
        """Return a session's eviction index as data ({"tiers": []} when nothing is evicted).

        The bound session's by default, or ``session_id``'s. The latest ``eviction_index``
        event, with blocks stored by reference to an earlier index event of the session put
        back in place.

        Example: for tier in ms.index()["tiers"]: print(tier)
        """
        sid = session_id if session_id is not None else self.session_id
        if sid is None:
            return {"tiers": []}
        rows = self._sql(
            "SELECT metadata FROM hist.conversation_history WHERE session_id = ? "
            "AND kind = 'eviction_index' ORDER BY seq DESC LIMIT 1",
            (str(sid),),
            what="index",
        )
        value = load_json(rows[0]["metadata"]) if rows else None
        if not isinstance(value, dict) or not value:
            return {"tiers": []}
        return self._resolve_blocks(value, str(sid))

    def _resolve_blocks(self, value: dict[str, Any], session_id: str) -> dict[str, Any]:
        # The view stores a block once; later index events name it {"stored_at": [seq, tier,
        # position]} (see scrollctx.view._stored). Blocks that do not resolve stay as stored.
        tiers = value.get("tiers")
        if not isinstance(tiers, list):
            return value
        cache: dict[int, Any] = {}
        resolved = []
        for tier in tiers:
            blocks = tier.get("blocks") if isinstance(tier, dict) else None
            if not isinstance(blocks, list):
                resolved.append(tier)
                continue
            resolved.append(
                {**tier, "blocks": [self._stored_block(b, cache, session_id) for b in blocks]}
            )
        return {**value, "tiers": resolved}

    def _stored_block(self, block: Any, cache: dict[int, Any], session_id: str) -> Any:
        where = block.get(_STORED_AT) if isinstance(block, dict) else None
        if not (isinstance(where, list) and len(where) == 3):
            return block
        if not all(isinstance(part, int) and part >= 0 for part in where):
            return block
        seq, level, position = where
        if seq not in cache:
            rows = self._sql(
                "SELECT metadata FROM hist.conversation_history WHERE seq = ? AND session_id = ? "
                "AND kind = 'eviction_index'",
                (seq, session_id),
                what="index",
            )
            cache[seq] = load_json(rows[0]["metadata"]) if rows else None
        try:
            found = cache[seq]["tiers"][level]["blocks"][position]
        except (KeyError, IndexError, TypeError):
            return block
        return found if isinstance(found, dict) and _STORED_AT not in found else block

    @staticmethod
    def days_between(d1: object, d2: object, inclusive: bool = False) -> int:
        """Return the calendar days between two dates (never negative; order does not matter).

        Takes dates or text containing YYYY-MM-DD / YYYY/MM/DD (a created_at works).
        inclusive=True counts both end days.

        Example: ms.days_between("2024-03-15", "2024-04-01") -> 17
        """
        return _days_between(d1, d2, inclusive)

    def drain_notes(self) -> list[str]:
        """Return and clear the notes of every call since the last drain (for the kernel).

        Example: for n in ms.drain_notes(): print("[note]", n)
        """
        notes, self._notes = self._notes, []
        return notes

    def help(self) -> str:
        """Return the usage of every ms call (signature and docstring).

        Example: print(ms.help())
        """
        parts = []
        for name in _PUBLIC:
            method = getattr(self, name)
            doc = inspect.cleandoc(method.__doc__ or "")
            parts.append(f"ms.{name}{_plain_signature(method)}\n    " + doc.replace("\n", "\n    "))
        return "\n\n".join(parts)

    # -- internals -------------------------------------------------------------------------

    def _keep(self, rows: ResultRows) -> ResultRows:
        self._notes.extend(rows.notes)
        return rows

    def _expand_span(self, first: object, last: object) -> ResultRows:
        if not _is_seq(first) or not _is_seq(last):
            raise QueryError(f"expand(lo, hi) takes two integer seqs; got {first!r}, {last!r}")
        lo, hi = sorted((cast(int, first), cast(int, last)))
        span = (clamp_int64(lo), clamp_int64(hi))  # no seq lies beyond SQLite's integers
        rows = self._select_rows("c.seq BETWEEN ? AND ?", span, f"expand({lo}, {hi})")
        if not rows and not rows.partial:
            rows.note(f"expand: no events between seq {lo} and {hi}")
        return rows

    def _select_rows(self, where: str, params: tuple[Any, ...], what: str) -> ResultRows:
        """Fetch full rows in seq order under the budgets, payloads materialized."""
        sql = (
            f"SELECT {_FULL_COLUMNS} FROM hist.conversation_history AS c "
            f"WHERE {where} ORDER BY c.seq LIMIT ?"
        )
        args = (*params, self._budgets.rows + 1)
        result = ResultRows()
        with self._deadline.running(self._budgets.seconds):
            try:
                self._collect(self._conn.execute(sql, args), result, what, full=True)
            except sqlite3.DatabaseError as exc:
                if is_undecodable(exc):  # a damaged row: read again so _full_row names its seq
                    with tolerant_text(self._conn):
                        result = ResultRows()
                        self._collect(self._conn.execute(sql, args), result, what, full=True)
                    return result
                self._raise_unless_timeout(exc, sql)
                result.note(self._time_note(what), partial=True)
        return result

    def _collect(
        self, cursor: sqlite3.Cursor, result: ResultRows, what: str, *, full: bool
    ) -> None:
        """Move rows from ``cursor`` into ``result`` until a row or byte budget stops it."""
        used = 0
        for values in cursor:
            if len(result) == self._budgets.rows:
                result.note(self._row_cap_note(what, result, full), partial=True)
                result.truncated = not full
                return
            row = as_dict(cursor, values)
            if full:
                row = self._full_row(row, result)
            used += row_bytes(row)
            if used > self._budgets.bytes and result:
                result.note(
                    f"{what} stopped after {len(result)} rows (last seq "
                    f"{result[-1].get('seq', '?')}): the {self._budgets.bytes}-byte budget ran "
                    "out -- ask for fewer rows or columns (substr(content, 1, N)), or page with "
                    "LIMIT/OFFSET",
                    partial=True,
                )
                return
            result.append(row)

    def _row_cap_note(self, what: str, result: ResultRows, full: bool) -> str:
        if not full:
            return _SQL_CAP_NOTE.format(what=what, cap=self._budgets.rows)
        return (
            f"{what} stopped after {self._budgets.rows} rows (row budget) at seq "
            f"{result[-1]['seq']}; continue after that seq"
        )

    def _verify(self, seqs: list[int]) -> None:
        """Check the stored checksum of each of these rows (search hits carry too few columns)."""
        if seqs:
            for row in fetch_rows(self._conn, _CHECK_SQL, (_json_list(seqs),)):
                self._verify_row(row)

    def _verify_row(self, row: dict[str, Any]) -> None:
        verify_event(row, path=self._db_path)

    def _full_row(self, row: dict[str, Any], result: ResultRows) -> dict[str, Any]:
        self._verify_row(row)
        for name in _CHECKED_ONLY:
            del row[name]
        row["metadata"] = load_json(row["metadata"]) or {}
        row["tool_input"] = load_json(row["tool_input"])
        row["payload_missing"] = False
        sha = row["payload_sha256"]
        if sha is not None:
            try:
                row["content"] = self._payloads.get(sha, seq=row["seq"]).decode("utf-8", "replace")
            except PayloadMissing as exc:
                row["payload_missing"] = True
                result.note(f"{exc}; content of seq {row['seq']} is only the stored preview")
        return row

    def _sql(self, sql: object, params: object, *, what: str = "sql_query") -> ResultRows:
        if not isinstance(sql, str) or not sql.strip():
            raise QueryError(f"sql_query needs one SQL statement as a string; got {sql!r}")
        match = _READ_STATEMENT.match(sql)
        word = match.group(1) if match else ""
        if word.lower() not in _READ_KEYWORDS:
            raise QueryError(_not_a_read(word, sql), query=sql)
        args = _sql_params(params, sql)
        result = ResultRows()
        with self._deadline.running(self._budgets.seconds):
            try:
                self._collect(self._conn.execute(sql, args), result, what, full=False)
            except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:
                raise QueryError(
                    f"{what} runs exactly one statement with matching parameters ({exc}); "
                    f"query: {_clip(sql)}",
                    query=sql,
                ) from exc
            except OverflowError as exc:
                raise QueryError(
                    f"{what}: a parameter is outside SQLite's 64-bit integer range ({exc}); "
                    f"query: {_clip(sql)}",
                    query=sql,
                ) from exc
            except sqlite3.DatabaseError as exc:
                self._raise_unless_timeout(exc, sql)
                result.note(self._time_note(what), partial=True)
        return result

    def _raise_unless_timeout(self, exc: sqlite3.DatabaseError, sql: str) -> None:
        if self._deadline.expired:
            return
        failure = known_failure(self._db_path, "ms read", exc)
        if failure is not None and not isinstance(failure, IntegrityError):
            raise failure from exc  # a full disk, a deleted -wal: the store, not the query
        if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _DAMAGED:
            raise IntegrityError(
                f"{self._db_path} is damaged ({exc}); the query is not at fault. Restore the "
                "store from a copy, or re-import its sources into a new one",
                path=str(self._db_path),
            ) from exc
        hint = ""
        if "not authorized" in str(exc) or "readonly" in str(exc):
            hint = " -- ms is read-only: writes, DDL, ATTACH/DETACH and writing pragmas are refused"
        elif "no such table" in str(exc):
            hint = f" -- the events are in {_TABLE} (columns: PRAGMA hist.table_info({_LOG_TABLE}))"
        elif (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _TOOBIG:
            limit = self._conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
            hint = (
                f" -- one value may hold at most {limit:,} bytes here; build smaller ones "
                "(substr, fewer rows in group_concat)"
            )
        raise QueryError(f"query failed: {exc}{hint}; query: {_clip(sql)}", query=sql) from exc

    def _time_note(self, what: str) -> str:
        return (
            f"{what} ran past the {self._budgets.seconds:g}s time budget and was stopped; the "
            "result is partial -- narrow with WHERE / LIMIT or fewer terms"
        )


def store_version(surface: MemorySurface) -> int:
    """The store's ``PRAGMA data_version`` on ``surface``'s connection: it changes whenever
    another connection commits, so a result read earlier still holds while it has not."""
    row = surface._conn.execute("PRAGMA hist.data_version").fetchone()
    return int(row[0])


def remembered(surface: MemorySurface) -> Any:
    """What ``surface`` keeps from one call to the next that can change a later answer (the
    search's cached term counts): taken before a call answered ahead, and put back with
    :func:`recall` when that answer goes unused, so that it leaves no trace."""
    return surface._searcher.term_stats.remembered()


def recall(surface: MemorySurface, state: Any) -> None:
    """Put back what :func:`remembered` returned."""
    surface._searcher.term_stats.recall(state)


def call_deadline(surface: MemorySurface) -> Deadline:
    """The deadline every call of ``surface`` runs under (to set a checkpoint on it)."""
    return surface._deadline


def _not_a_read(word: str, sql: str) -> str:
    """Why ``sql`` is refused: a write (say so), or not a statement we know (suggest one)."""
    runs = "it runs one SELECT / WITH / VALUES / EXPLAIN / read PRAGMA statement"
    if word.lower() in _WRITE_KEYWORDS:
        return f"sql_query is read-only: {runs}; refused: {_clip(sql)}"
    import difflib  # only for this message: `scroll search` and most cells never need it

    close = difflib.get_close_matches(word.upper(), [k.upper() for k in _READ_KEYWORDS], n=1)
    guess = f" -- did you mean {close[0]}?" if close else ""
    start = f"{word!r} does not start" if word else "nothing starts"
    return f"{start} an SQL statement sql_query can run{guess} ({runs}): {_clip(sql)}"


def _has_fts5(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT value FROM hist._meta WHERE key = 'fts5'").fetchone()
    if row is None or row[0] != "1":
        return False
    try:
        conn.execute("SELECT rowid FROM hist.conversation_history_fts LIMIT 0").fetchall()
    except sqlite3.OperationalError:
        return False  # the store has an index this SQLite build cannot read
    return True


def _is_seq(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain_signature(method: Any) -> str:
    """Render a signature the way the model calls it: names and defaults, no annotations."""
    params = []
    seen_star = False
    for param in inspect.signature(method).parameters.values():
        if param.kind is param.KEYWORD_ONLY and not seen_star:
            params.append("*")
            seen_star = True
        text = param.name
        if param.default is not param.empty:
            text += f"={param.default!r}"
        params.append(text)
    return "(" + ", ".join(params) + ")"


def _seqs_of(value: object) -> list[int]:
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise QueryError(
            "expand takes a seq, a list of seqs, search hits, or (lo, hi); "
            f"got {type(value).__name__} {_clip(repr(value))}"
        )
    seqs: list[int] = []
    for item in value:
        seq = item.get("seq") if isinstance(item, Mapping) else item
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise QueryError(f"expand: {_clip(repr(item))} is not a seq or a row with a 'seq'")
        seqs.append(seq)
    return seqs


def _json_list(seqs: list[int]) -> str:
    return "[" + ",".join(str(s) for s in seqs) + "]"


def _sql_params(params: object, sql: str) -> tuple[Any, ...] | dict[str, Any]:
    if params is None:
        return ()
    if isinstance(params, Mapping):
        return dict(params)
    if isinstance(params, str | bytes) or not isinstance(params, Iterable):
        raise QueryError(
            f"params must be a tuple/list (for ?) or a dict (for :name); got {params!r}; "
            f"query: {_clip(sql)}",
            query=sql,
        )
    return tuple(params)


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
