"""Model-written summaries for the summarization baseline and the lossy-summary ablation.

- :meth:`Summarizer.update` folds text into a running summary: the summarization baseline's
  compaction of the history at every session boundary (the protocol clears the raw context
  there) and, inside a session longer than ``chunk_tokens``, once per chunk; with another
  prompt, the summarization agent's compaction of its own work during a run
  (:mod:`scrollctx.bench._compaction`).
- :func:`lossy_transform` replaces each session's turns by one summary event (the lossy
  ablation: the originals are discarded before they reach the Event Log).

Invariants: summaries are made at temperature 0; each call's tokens are counted and returned,
so ingestion cost is reported; an empty reply is a :class:`~scrollctx.errors.BadResponse`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scrollctx.agent import Backend, ChatRequest
from scrollctx.bench._histories import SessionTransform
from scrollctx.errors import BadResponse, ContextTooLong
from scrollctx.log import NewEvent
from scrollctx.view import estimate_tokens

__all__ = ["Summarizer", "lossy_transform", "session_text"]

_UPDATE_PROMPT = (
    "You keep the memory of an assistant that talks with one user over many sessions. Below "
    "is your current summary (possibly empty) and the next part of the conversation. Write "
    "the new summary: keep everything from the current summary that still matters and add "
    "what the new part says about the user: facts, names, numbers with their units, dates, "
    "plans, decisions, preferences, and any value that changed (say what it changed from and "
    "to). Write at most {words} words. Reply with the summary only.\n\n"
    "Current summary:\n{summary}\n\nNext part of the conversation:\n{text}"
)


def session_text(events: Sequence[NewEvent]) -> str:
    """The session's turns as the model would read them (one turn per line)."""
    return "\n".join(event.content for event in events)


class Summarizer:
    """Writes summaries with one backend at temperature 0."""

    def __init__(
        self,
        backend: Backend,
        *,
        chunk_tokens: int = 6000,
        words: int = 600,
        prompt: str = _UPDATE_PROMPT,
    ) -> None:
        self.backend = backend
        self.chunk_tokens = chunk_tokens
        self.words = words
        self.prompt = prompt
        """With ``{words}``, ``{summary}`` and ``{text}`` fields (default: a user's history)."""

    def update(self, summary: str, text: str) -> tuple[str, int, int]:
        """Fold ``text`` into ``summary``; return (new summary, tokens in, tokens out).

        A chunk the backend rejects as too long (a small local window) is halved and retried,
        down to a single line; a single line that still does not fit re-raises.
        """
        tokens_in = tokens_out = 0
        pending = _chunks(text, self.chunk_tokens)
        while pending:
            chunk = pending.pop(0)
            try:
                summary, used_in, used_out = self._fold(summary, chunk)
            except ContextTooLong:
                halves = _halves(chunk)
                if halves is None:
                    raise
                pending[:0] = halves
                continue
            tokens_in += used_in
            tokens_out += used_out
        return summary, tokens_in, tokens_out

    def _fold(self, summary: str, chunk: str) -> tuple[str, int, int]:
        prompt = self.prompt.format(words=self.words, summary=summary or "(empty)", text=chunk)
        request = ChatRequest(
            messages=[{"role": "user", "content": prompt}], options={"temperature": 0.0}
        )
        completion = self.backend.complete(request)
        if not completion.text.strip():
            raise BadResponse(
                "the summarizer model returned an empty summary; check the model",
                backend=self.backend.name,
            )
        usage = completion.usage
        used = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
        return completion.text.strip(), *used


def _halves(chunk: str) -> list[str] | None:
    """Split a chunk into two pieces on a line boundary, or ``None`` for a single line."""
    lines = chunk.split("\n")
    if len(lines) < 2:
        return None
    middle = len(lines) // 2
    return ["\n".join(lines[:middle]), "\n".join(lines[middle:])]


def _chunks(text: str, limit: int) -> list[str]:
    """Split on line boundaries into pieces of at most ``limit`` estimated tokens."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        cost = estimate_tokens(line) + 1
        if current and size + cost > limit:
            pieces.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += cost
    if current:
        pieces.append("\n".join(current))
    return pieces


def lossy_transform(summarizer: Summarizer) -> SessionTransform:
    """A transform that replaces each session's turns by one summary event."""

    def transform(events: list[NewEvent]) -> tuple[list[NewEvent], int, int]:
        summary, tokens_in, tokens_out = summarizer.update("", session_text(events))
        first = events[0]
        date = first.metadata.get("date")
        tag = f"[Session {first.step_index} | {date}]" if date else f"[Session {first.step_index}]"
        event = dataclasses.replace(
            first,
            role="assistant",
            name=None,
            content=f"{tag} summary: {summary}",
            msg_index=first.msg_index,
            metadata={**dict(first.metadata), "summary_of": len(events)},
            dedup_key=f"summary:{first.session_id}",
        )
        return [event], tokens_in, tokens_out

    return transform
