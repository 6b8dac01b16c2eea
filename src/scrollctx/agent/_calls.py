"""What the model received on each call of a session, rebuilt from the Event Log alone.

Model call N of a session is the call its N-th response (assistant view turn) answers
(:func:`~scrollctx.view.call_seqs`). Its request is rebuilt by the code that built it live:
:meth:`WorkingView.restore` with ``before_seq`` the response's seq (the live turns, folds, pins
and index as they stood), rendered by :meth:`ScrollPolicy.request` (the index header swap
included), and sent through the OpenAI wire rendering of the backend. The loop logs the three
things a view cannot rebuild by itself (:mod:`scrollctx.agent._loop`): each run's system prompt
and index header (a ``system`` event with ``metadata.prompt``) and each call's digest and budget
(``metadata.model_call`` of the response). A session the loop did not write (``scroll
simulate``, a hand-driven view) has none of them: its calls rebuild without a system prompt or
digest, and say so (``system is None``).

Nothing here writes: restoring a view only reads, so this works on a store opened with
:meth:`EventLog.open_read_only`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scrollctx.agent._loop import PROMPT_KEY
from scrollctx.agent._policy import ScrollPolicy
from scrollctx.agent.backends import ChatRequest, Message
from scrollctx.agent.backends._openai import to_openai_messages
from scrollctx.errors import UsageError
from scrollctx.log import Event, EventLog, Kind
from scrollctx.view import (
    INDEX_KIND,
    STATE_KIND,
    VIEW_KEY,
    Turn,
    WorkingView,
    call_seqs,
    live_seqs,
)

__all__ = ["CallChanges", "ModelCall", "call_changes", "call_digest", "rebuild_call"]

_UNLOGGED_BUDGET = 128_000
"""The window assumed when a call's budget is not in the log (it changes no message)."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call as the model received it (see the module docstring)."""

    session_id: str
    number: int
    """1-based position among the session's calls."""
    calls: int
    """How many calls the session has."""
    seq: int
    """The call's response: the assistant turn written after it."""
    system: str | None
    """The run's system prompt; ``None`` when the log does not hold one."""
    digest: str | None
    """The namespace digest sent last; ``None`` when the log does not hold one."""
    messages: list[Message]
    """The body the loop handed the backend (system prompt apart), in order: the index
    message, the live turns, the digest."""
    view: WorkingView
    """The restored view: its live turns (with seq, folded, pinned) and index."""
    parts: list[tuple[str, Message, Turn | None]] = field(default_factory=list)
    """The body part by part, before the OpenAI layout joined the index and the digest to
    the turns beside them: ``(kind, message, turn)``, kind ``index``, ``turn`` or ``digest``."""
    meta: dict[str, Any] = field(default_factory=dict)
    """The response's ``metadata.model_call`` (backend, model, usage, latency...)."""

    def wire_messages(self) -> list[dict[str, Any]]:
        """Return the messages as an OpenAI-compatible endpoint received them (system first)."""
        return to_openai_messages(ChatRequest(self.messages, self.system or ""))

    def part_tokens(self) -> dict[str, int]:
        """Tokens of each part of the request, as the view counts them: system, index (with
        the view's own header), live turns, digest."""
        return self.view.part_tokens()


@dataclass(frozen=True, slots=True)
class CallChanges:
    """What left the view, or was folded, between the previous call and this one."""

    evicted: list[int]
    """Seqs of turns that were live (or arrived) after the previous call and are gone now."""
    folded: list[int]
    """Seqs of tool results folded to stubs since the previous call."""
    index_events: list[int]
    """Seqs of the index events written in between (each one eviction round)."""


def call_digest(response: Event) -> str | None:
    """The digest the call answered by ``response`` carried, as the loop logged it (or None)."""
    digest = (response.metadata.get("model_call") or {}).get("digest")
    return digest if isinstance(digest, str) else None


def rebuild_call(
    log: EventLog, session_id: str, number: int, *, seqs: Sequence[int] | None = None
) -> ModelCall:
    """Rebuild model call ``number`` (1-based) of a session from the log.

    ``seqs``: the session's :func:`~scrollctx.view.call_seqs`, when the caller has them.

    Raises:
        UsageError: the session has no such call.
        IntegrityError: the session's index events are malformed.
    """
    seqs = call_seqs(log, session_id) if seqs is None else seqs
    if not 1 <= number <= len(seqs):
        raise UsageError(
            f"session {session_id!r} has {len(seqs)} model calls; there is no call {number}"
        )
    seq = seqs[number - 1]
    response = log.get(seq)
    meta = dict(response.metadata.get("model_call") or {})
    prompt = _prompt_before(log, session_id, seq)
    system = log.full_text(prompt) if prompt is not None else None
    header = prompt.metadata[PROMPT_KEY].get("index_header") if prompt is not None else None
    view = WorkingView.restore(
        log,
        session_id,
        system or "",
        before_seq=seq,
        budget_tokens=int(meta.get("budget_tokens") or _UNLOGGED_BUDGET),
        with_index=not _has_kind(log, session_id, STATE_KIND),
    )
    digest = call_digest(response)
    policy = ScrollPolicy(view, index_header=header)
    _, messages = policy.request(digest or "")
    return ModelCall(
        session_id, number, len(seqs), seq, system, digest, messages, view, policy.parts(), meta
    )


def call_changes(log: EventLog, current: ModelCall, previous_seq: int | None) -> CallChanges:
    """What happened to the view between the previous call (its response at ``previous_seq``;
    ``None``: there is none, all of it before call 1) and ``current``."""
    sid, with_index = current.session_id, current.view.with_index
    before: set[int] = set()
    folded_before: set[int] = set()
    if previous_seq is not None:
        before, folded_before = live_seqs(log, sid, before_seq=previous_seq, with_index=with_index)
    after = previous_seq - 1 if previous_seq is not None else 0
    between = log.session_events(sid, after_seq=after, before_seq=current.seq)
    before |= {e.seq for e in between if VIEW_KEY in e.metadata}
    return CallChanges(
        evicted=sorted(before - _seqs(current.view.turns)),
        folded=sorted(_seqs(t for t in current.view.turns if t.folded) - folded_before),
        index_events=[e.seq for e in between if e.kind in (INDEX_KIND, STATE_KIND)],
    )


def _seqs(turns: Iterable[Turn]) -> set[int]:
    return {turn.seq for turn in turns if turn.seq is not None}


def _prompt_before(log: EventLog, session_id: str, seq: int) -> Event | None:
    rows = log.execute(
        "SELECT seq FROM conversation_history WHERE session_id = ? AND kind = ? AND seq < ? "
        "AND json_type(metadata, ?) IS NOT NULL ORDER BY seq DESC LIMIT 1",
        (session_id, Kind.SYSTEM, seq, f"$.{PROMPT_KEY}"),
    )
    return log.get(int(rows[0][0])) if rows else None


def _has_kind(log: EventLog, session_id: str, kind: str) -> bool:
    rows = log.execute(
        "SELECT 1 FROM conversation_history WHERE session_id = ? AND kind = ? LIMIT 1",
        (session_id, kind),
    )
    return bool(rows)
