"""The data of the model-call and index pages: what the model saw, and where the rest went.

A thin layer over :func:`scrollctx.agent.rebuild_call` (the view's own restore and render code)
and :func:`scrollctx.view.load_index`: this module only pairs each rendered message with the
turn (and ``seq``) it came from, and each index line with its span, for linking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrollctx.agent import CallChanges, ModelCall, call_changes, rebuild_call
from scrollctx.log import EventLog
from scrollctx.view import EvictionIndex, IndexLine, Turn, call_seqs, index_events, load_index

__all__ = [
    "CallPage",
    "IndexPiece",
    "MessagePart",
    "call_page",
    "index_page",
    "index_pieces",
    "spans_text",
]

MESSAGE_CHARS = 20_000
"""Characters of one message shown before its ``load more``."""


@dataclass(frozen=True, slots=True)
class IndexPiece:
    """One line of the index message as the model read it; ``line`` is its span, if any."""

    text: str
    line: IndexLine | None


@dataclass(frozen=True, slots=True)
class MessagePart:
    """One message of the request: what it is, the turn it renders, its shown text.

    On an OpenAI-compatible wire the index opens the first user message and the digest closes
    the last one (roles alternate): such a message is one part, of the turn it renders, with
    ``opens_with_index``; its ``text`` is then what follows the index.
    """

    role: str
    part: str
    """``index``, ``turn`` or ``digest``."""
    message: dict[str, Any]
    turn: Turn | None
    text: str
    is_cut: bool
    opens_with_index: bool = False


@dataclass(frozen=True, slots=True)
class CallPage:
    """Everything the model-call page shows."""

    call: ModelCall
    changes: CallChanges
    parts: list[MessagePart]
    header: str
    """The index message's header as sent (the view's own, or the run's replacement)."""
    index: list[IndexPiece]
    tokens: dict[str, int]


def call_page(log: EventLog, session_id: str, number: int, seqs: list[int]) -> CallPage:
    """Rebuild call ``number`` and the call before it; pair messages with their turns.

    ``seqs``: the session's :func:`~scrollctx.view.call_seqs`.
    """
    call = rebuild_call(log, session_id, number, seqs=seqs)
    previous = seqs[number - 2] if number > 1 else None
    parts = _parts(call)
    header, pieces = "", list[IndexPiece]()
    index = next((str(m["content"]) for kind, m, _ in call.parts if kind == "index"), None)
    if index is not None:
        header, pieces = _index_message(call.view.index, index)
    return CallPage(
        call, call_changes(log, call, previous), parts, header, pieces, call.part_tokens()
    )


def _parts(call: ModelCall) -> list[MessagePart]:
    """One part per message sent, each with the view parts it holds (matched by text)."""
    pending = list(call.parts)
    parts = []
    for message in call.messages:
        content = message.get("content")
        held = _held(pending, content)
        kinds = [kind for kind, _, _ in held]
        turn = next((t for _, _, t in held if t is not None), None)
        text = content if isinstance(content, str) else _json(content)
        opens = kinds[:1] == ["index"] and len(held) > 1
        if opens:
            text = text[len(str(held[0][1]["content"])) :]
        parts.append(
            MessagePart(
                str(message["role"]),
                "turn" if turn is not None else (kinds[0] if kinds else "turn"),
                dict(message),
                turn,
                text[:MESSAGE_CHARS],
                len(text) > MESSAGE_CHARS,
                opens,
            )
        )
    return parts


def _held(pending: list[Any], content: Any) -> list[Any]:
    """Take from ``pending`` the view parts one sent message holds (their texts joined)."""
    held = [pending.pop(0)] if pending else []
    while pending and isinstance(content, str) and _text(held) != content:
        held.append(pending.pop(0))
    return held


def _text(parts: list[Any]) -> str:
    return "\n\n".join(str(message.get("content")) for _, message, _ in parts)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, indent=1)


def index_pieces(index: EvictionIndex) -> list[IndexPiece]:
    """The index message's text, piece by piece, as the view renders it."""
    return [IndexPiece(text, line) for text, line in index.render_parts()]


def _index_message(index: EvictionIndex, content: str) -> tuple[str, list[IndexPiece]]:
    """Split the index message into its header (as sent) and the linked body pieces."""
    pieces = index_pieces(index)[1:]  # the first piece is the view's own header
    body = "\n".join(piece.text for piece in pieces)
    if not content.endswith(body):
        return content, []  # not a message this index renders: show it unlinked
    return content[: len(content) - len(body)], pieces


@dataclass(frozen=True, slots=True)
class IndexPage:
    """The index page: every index event of the session, and the index as of one of them."""

    events: list[dict[str, Any]]
    at: int | None
    data: dict[str, Any] | None
    pieces: list[IndexPiece]
    calls: dict[int, int]
    """Index event seq -> number of the first call that received that index."""


def index_page(log: EventLog, session_id: str, at: int | None) -> IndexPage:
    """The session's index events and the index as it stood after event ``at`` (latest)."""
    events = index_events(log, session_id)
    chosen = at if at is not None else (events[-1]["seq"] if events else None)
    data = load_index(log, session_id, before_seq=chosen + 1) if chosen is not None else None
    pieces = index_pieces(EvictionIndex.from_data(data)) if data else []
    seqs = call_seqs(log, session_id)
    calls: dict[int, int] = {}
    position = 0
    for event in events:
        while position < len(seqs) and seqs[position] < event["seq"]:
            position += 1
        if position < len(seqs):
            calls[event["seq"]] = position + 1
    return IndexPage(events, chosen, data, pieces, calls)


def spans_text(seqs: list[int]) -> list[tuple[int, int]]:
    """Collapse sorted seqs into runs ``(lo, hi)`` of consecutive numbers (for short lists)."""
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and runs[-1][1] == seq - 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    return runs
