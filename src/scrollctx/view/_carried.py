"""The carried index (paper §3.3): an imported conversation kept addressable, session by session.

The paper's protocol imports a conversation session by session, in chronological order; at
each session boundary the raw context is cleared and only Scroll's state goes forward: the
Event Log and an eviction index to which each finished session adds one block. That index
opens every later question about the conversation. Here ingestion writes it (``scroll
ingest``, the evaluation's stores), and ``Agent.ask`` hands it to the question's session, so
the everyday flow is the paper's flow.

- One block per session: up to :data:`LINES_PER_SESSION` lines, each a contiguous run of the
  session's turns whose text is its first turn's extractive label; the block's first line
  carries the session mark ``{"n": step_index, "seq": first seq, "date": metadata.date}``
  (see :mod:`scrollctx.view._index`: marks survive every roll-up, so each session stays
  addressable at a glance however long the history).
- Sessions are added in chronological order (``step_index``, then ``seq``) to an
  :class:`~scrollctx.view._index.EvictionIndex` of tier width ``k``, which rolls up as a
  working view's index does: O(k log_k n) blocks after n sessions.
- The index is stored as an ``eviction_index`` event of the session
  ``carried_session(task_id)`` (``index:<task_id>``; not searchable, no ``task_id`` of its
  own, so the conversation's rows stay exactly what was imported). :func:`write_carried_indexes`
  appends a new one only when the conversation's imported events changed.

Invariants: no model is called; the index is a function of the conversation's imported events
(``run_id = 'ingest'``) in the log; its lines' spans cover every one of them exactly once, in
ascending, disjoint order; a conversation's latest index event is its carried index.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scrollctx.log import EventStore, NewEvent
from scrollctx.view._index import EvictionIndex, IndexBlock, IndexLine, clip_line
from scrollctx.view._working import INDEX_KIND, load_index

__all__ = [
    "CARRIED_PREFIX",
    "LINES_PER_SESSION",
    "ImportedTurn",
    "build_carried_index",
    "carried_index",
    "carried_session",
    "carried_task_ids",
    "conversation_sessions",
    "session_block",
    "write_carried_indexes",
]

CARRIED_PREFIX = "index:"
"""Session ids of carried indexes are this prefix and the conversation's ``task_id``."""

LINES_PER_SESSION = 8
_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class ImportedTurn:
    """What the carried index needs of one imported event."""

    seq: int
    session_id: str
    session: int | None
    """The chronological session number (``step_index``)."""
    date: str | None
    text: str
    """The event's extractive label, else the start of its content."""


def session_block(turns: Sequence[ImportedTurn], number: int) -> IndexBlock:
    """One session's block: up to eight lines of contiguous turns, the first with its mark."""
    size = max(1, math.ceil(len(turns) / LINES_PER_SESSION))
    lines = []
    for start in range(0, len(turns), size):
        chunk = turns[start : start + size]
        marks = []
        if start == 0:
            marks = [{"n": chunk[0].session or number, "seq": chunk[0].seq, "date": chunk[0].date}]
        text = clip_line(chunk[0].text)
        lines.append(IndexLine(chunk[0].seq, chunk[-1].seq, "turn", text, sessions=marks))
    return IndexBlock(lines)


def build_carried_index(sessions: Iterable[Sequence[ImportedTurn]], k: int = 4) -> EvictionIndex:
    """The index of sessions given oldest first: one block each, rolled up with tier width k."""
    index = EvictionIndex(k, "carried")
    for number, turns in enumerate(sessions, 1):
        if turns:
            index.add(session_block(turns, number), len(turns))
    return index


def conversation_sessions(log: EventStore, task_id: str) -> list[list[ImportedTurn]]:
    """A conversation's imported events, grouped by session, in chronological order."""
    rows = log.execute(
        "SELECT seq, session_id, step_index, coalesce(label, substr(content, 1, ?)) AS text, "
        "json_extract(metadata, '$.date') AS date FROM conversation_history "
        "WHERE task_id = ? AND run_id = 'ingest' AND kind != ? ORDER BY seq",
        (_TEXT_CHARS, task_id, INDEX_KIND),
    )
    grouped: dict[str, list[ImportedTurn]] = {}
    for row in rows:
        date = row["date"] if isinstance(row["date"], str) else None
        turn = ImportedTurn(
            int(row["seq"]), str(row["session_id"]), row["step_index"], date, str(row["text"])
        )
        grouped.setdefault(turn.session_id, []).append(turn)
    return sorted(grouped.values(), key=lambda turns: (turns[0].session or 0, turns[0].seq))


def carried_session(task_id: str) -> str:
    """The session holding the carried index of conversation ``task_id``."""
    return CARRIED_PREFIX + task_id


def carried_index(log: EventStore, task_id: str) -> dict[str, Any] | None:
    """The carried index of conversation ``task_id`` as data, or ``None`` when it has none."""
    return load_index(log, carried_session(task_id))


def carried_task_ids(log: EventStore, limit: int = 1000) -> list[str]:
    """The conversations that have a carried index (at most ``limit``, in id order)."""
    rows = log.execute(
        "SELECT DISTINCT session_id FROM conversation_history WHERE kind = ? AND "
        "substr(session_id, 1, ?) = ? ORDER BY session_id LIMIT ?",
        (INDEX_KIND, len(CARRIED_PREFIX), CARRIED_PREFIX, limit),
    )
    return [str(row["session_id"])[len(CARRIED_PREFIX) :] for row in rows]


def write_carried_indexes(
    log: EventStore, task_ids: Iterable[str], *, k: int = 4
) -> dict[str, int]:
    """Rebuild each conversation's carried index; append it where it changed.

    Returns the seq of each index event written (conversations whose index was already up to
    date, or that hold no imported events, are left out).
    """
    written: dict[str, int] = {}
    for task_id in sorted(set(task_ids)):
        index = build_carried_index(conversation_sessions(log, task_id), k)
        if index.is_empty or _unchanged(carried_index(log, task_id), index):
            continue
        session = carried_session(task_id)
        index.session_id = session
        written[task_id] = log.append(
            NewEvent(
                session_id=session,
                kind=INDEX_KIND,
                role="system",
                content=f"carried index of {task_id}: {index.counters['evictions']} sessions, "
                f"{index.counters['evicted_events']} events, {index.block_count()} blocks",
                metadata=index.to_data(),
                searchable=False,
            )
        )
    return written


def _unchanged(stored: dict[str, Any] | None, index: EvictionIndex) -> bool:
    return stored is not None and stored.get("tiers") == index.to_data()["tiers"]
