"""The data of the sessions list and of a session's timeline, read from a read-only log.

Pages never hold a whole session or a whole payload: the timeline reads one page of events
(:data:`PAGE_EVENTS`) from a given seq, each event's text is shown as a bounded preview, and
the full text comes in chunks of :data:`TEXT_CHUNK` characters (``load more``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scrollctx.log import Event, EventLog, Kind
from scrollctx.view import CARRIED_PREFIX, VIEW_KEY

__all__ = [
    "PAGE_EVENTS",
    "TEXT_CHUNK",
    "EventRow",
    "SessionRow",
    "Timeline",
    "list_sessions",
    "session_exists",
    "text_chunk",
    "timeline",
]

PAGE_EVENTS = 200
TEXT_CHUNK = 20_000
PREVIEW_CHARS = 300
KINDS = ("agent run", "chat", "probe", "imported", "carried index", "view", "other")

_SESSIONS_SQL = """
SELECT g.*, json_extract(c.metadata, '$.source') AS source, c.agent_id AS first_agent,
       json_extract(z.metadata, '$.model') AS last_model
FROM (
  SELECT session_id, min(task_id) AS task_id, count(DISTINCT agent_id) AS agents,
         min(run_id) AS run_id, count(*) AS events, min(seq) AS first_seq, max(seq) AS last_seq,
         min(created_at) AS first_at, max(created_at) AS last_at,
         sum(CASE WHEN kind = 'model_turn'
             THEN json_extract(metadata, '$.model_call.usage.prompt_tokens') END) AS tokens_in,
         sum(CASE WHEN kind = 'model_turn'
             THEN json_extract(metadata, '$.model_call.usage.completion_tokens') END)
             AS tokens_out,
         max(CASE WHEN kind = 'model_turn'
             THEN json_extract(metadata, '$.model_call.model') END) AS call_model,
         max(CASE WHEN kind = 'model_turn'
             THEN json_type(metadata, '$.view_turn') IS NOT NULL END) AS has_view
  FROM conversation_history GROUP BY session_id
) AS g
JOIN conversation_history AS c ON c.seq = g.first_seq
JOIN conversation_history AS z ON z.seq = g.last_seq
ORDER BY g.first_seq
"""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One line of the sessions list."""

    session_id: str
    kind: str
    task_id: str | None
    agent: str
    """The first event's agent (``main`` when it names none), and how many sub-agents."""
    events: int
    first_seq: int
    last_seq: int
    first_at: str
    last_at: str
    tokens: int | None
    model: str | None


def _kind(row: Any) -> str:
    sid, run = str(row["session_id"]), row["run_id"]
    if sid.startswith(CARRIED_PREFIX):
        return "carried index"
    if run == "ingest":
        return "imported"
    for prefix, kind in (("ask-", "probe"), ("chat-", "chat"), ("run-", "agent run")):
        if sid.startswith(prefix):
            return kind
    return "view" if row["has_view"] else "other"


def _agents(first: str | None, distinct: int) -> str:
    others = distinct - (1 if first else 0)
    name = first or "main"
    return f"{name} + {others} sub-agent{'s' if others > 1 else ''}" if others > 0 else name


def list_sessions(log: EventLog, *, kind: str = "", query: str = "") -> list[SessionRow]:
    """Every session, oldest first, filtered by kind and by a substring of its names."""
    wanted = query.lower()
    found = []
    for row in log.execute(_SESSIONS_SQL):
        tokens = (row["tokens_in"] or 0) + (row["tokens_out"] or 0)
        session = SessionRow(
            session_id=str(row["session_id"]),
            kind=_kind(row) + (f" ({row['source']})" if row["source"] else ""),
            task_id=row["task_id"],
            agent=_agents(row["first_agent"], int(row["agents"])),
            events=int(row["events"]),
            first_seq=int(row["first_seq"]),
            last_seq=int(row["last_seq"]),
            first_at=str(row["first_at"]),
            last_at=str(row["last_at"]),
            tokens=tokens or None,
            model=row["call_model"] or row["last_model"],
        )
        names = f"{session.session_id} {session.task_id or ''} {session.agent}"
        if kind and not session.kind.startswith(kind):
            continue
        if wanted and wanted not in names.lower():
            continue
        found.append(session)
    return found


def session_exists(log: EventLog, session_id: str) -> bool:
    """Whether the session has any event."""
    rows = log.execute(
        "SELECT 1 FROM conversation_history WHERE session_id = ? LIMIT 1", (session_id,)
    )
    return bool(rows)


@dataclass(slots=True)
class EventRow:
    """One event of the timeline, with what the page shows beside it."""

    event: Event
    size: int
    preview: str
    is_cut: bool
    depth: int
    """0 for the session's main agent, 1 for a sub-agent's event."""
    agent_label: str | None
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls this event makes: ``id``, ``name``, ``arguments`` and its ``result`` row."""
    answers: int | None = None
    """For a tool result: the seq of the call it answers."""
    in_view: bool = False


@dataclass(frozen=True, slots=True)
class Timeline:
    """One page of a session's events."""

    session_id: str
    rows: list[EventRow]
    first_seq: int
    last_seq: int
    next_seq: int | None
    previous_seq: int | None


def timeline(log: EventLog, session_id: str, *, at: int = 0) -> Timeline:
    """The page of the session's events starting at seq ``at`` (its first page for 0)."""
    bounds = log.execute(
        "SELECT min(seq), max(seq) FROM conversation_history WHERE session_id = ?", (session_id,)
    )[0]
    first, last = int(bounds[0]), int(bounds[1])
    seqs = _page_seqs(log, session_id, "seq >= ? ORDER BY seq", at, PAGE_EVENTS + 1)
    earlier = _page_seqs(log, session_id, "seq < ? ORDER BY seq DESC", at, PAGE_EVENTS)
    events = log.events(seqs[:PAGE_EVENTS])
    rows = [_row(event) for event in events]
    _pair_calls(log, session_id, rows)
    return Timeline(
        session_id,
        rows,
        first,
        last,
        next_seq=seqs[PAGE_EVENTS] if len(seqs) > PAGE_EVENTS else None,
        previous_seq=earlier[-1] if earlier else None,
    )


def _page_seqs(log: EventLog, session_id: str, where: str, at: int, limit: int) -> list[int]:
    rows = log.execute(
        f"SELECT seq FROM conversation_history WHERE session_id = ? AND {where} LIMIT ?",
        (session_id, at, limit),
    )
    return [int(row[0]) for row in rows]


def _row(event: Event) -> EventRow:
    size = event.payload_size if event.payload_size is not None else len(event.content)
    meta = event.metadata
    sub = meta.get("agent_kind") == "subagent"
    label = None
    if sub:
        kind = meta.get("subagent_type")
        label = f"sub-agent {event.agent_id}" + (f" ({kind})" if kind else "")
    row = EventRow(
        event=event,
        size=size,
        preview=event.content[:PREVIEW_CHARS],
        is_cut=event.payload_sha256 is not None or len(event.content) > PREVIEW_CHARS,
        depth=1 if sub else 0,
        agent_label=label,
        in_view=VIEW_KEY in meta,
    )
    row.calls = _calls_of(event)
    return row


def _calls_of(event: Event) -> list[dict[str, Any]]:
    """The tool calls an event makes: a view's assistant turn lists them in ``tool_input``; an
    imported ``tool_call`` event is one call."""
    if event.kind == Kind.TOOL_CALL and event.tool_call_id:
        return [{"id": event.tool_call_id, "name": event.name, "arguments": event.tool_input}]
    if event.kind == Kind.MODEL_TURN and isinstance(event.tool_input, list):
        return [dict(call) for call in event.tool_input if isinstance(call, dict)]
    return []


def _pair_calls(log: EventLog, session_id: str, rows: list[EventRow]) -> None:
    """Put each call's result beside it, and on each result the call it answers.

    Pairing is positional: a call's result is the first result with its id after it, a
    result's call the last call with its id before it (ids can repeat within a session).
    """
    if not rows:
        return
    first, last = rows[0].event.seq, rows[-1].event.seq
    # (seq, is a result, call id, the call's dict, the result's row on this page)
    marks: list[tuple[int, bool, str, dict[str, Any] | None, EventRow | None]] = []
    before = _events_with_calls(log, session_id, before=first)
    on_page = [(row.event.seq, call) for row in rows for call in row.calls]
    marks += [(seq, False, str(call.get("id")), call, None) for seq, call in before + on_page]
    marks += [
        (r.event.seq, True, str(r.event.tool_call_id), None, r) for r in rows if _is_result(r.event)
    ]
    marks += [(seq, True, cid, None, None) for seq, cid in _results_after(log, session_id, last)]
    waiting: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seq, is_result, call_id, call, row in sorted(marks, key=lambda m: (m[0], m[1])):
        if call is not None:
            waiting.setdefault(call_id, []).append((seq, call))
        elif is_result and waiting.get(call_id):
            call_seq, answered = waiting[call_id].pop(0)
            answered["result"] = {"seq": seq}
            if row is not None:
                row.answers = call_seq


def _is_result(event: Event) -> bool:
    return event.kind == Kind.TOOL_RESULT and event.tool_call_id is not None


def _events_with_calls(
    log: EventLog, session_id: str, *, before: int
) -> list[tuple[int, dict[str, Any]]]:
    """The calls of the events just before a page (their results may be on it)."""
    seqs = _page_seqs(
        log, session_id, "seq < ? AND tool_input IS NOT NULL ORDER BY seq DESC", before, 50
    )
    return [(e.seq, call) for e in log.events(seqs) for call in _calls_of(e)]


def _results_after(log: EventLog, session_id: str, after: int) -> list[tuple[int, str]]:
    """The results just after a page (of the calls at its end)."""
    rows = log.execute(
        "SELECT seq, tool_call_id FROM conversation_history WHERE session_id = ? AND kind = ? "
        "AND tool_call_id IS NOT NULL AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, Kind.TOOL_RESULT, after, PAGE_EVENTS),
    )
    return [(int(row[0]), str(row[1])) for row in rows]


def text_chunk(log: EventLog, seq: int, offset: int) -> tuple[Event, str, int | None]:
    """A chunk of an event's full text from ``offset``; the next offset, or None at the end."""
    event = log.get(seq)
    text = log.full_text(event)
    end = offset + TEXT_CHUNK
    return event, text[offset:end], end if end < len(text) else None
