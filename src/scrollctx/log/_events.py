"""Event values: what callers append (:class:`NewEvent`) and what the log returns (:class:`Event`).

These are pure values. Identity (``seq``) is assigned by the store at commit time and never
changes; nothing here talks to a database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Event", "Kind", "NewEvent", "utc_now_iso"]


class Kind:
    """The event kinds scrollctx writes itself. ``kind`` is free text: importers may add more."""

    USER_MESSAGE = "user_message"
    MODEL_TURN = "model_turn"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"
    CONVERSATION = "conversation"
    """An imported chat turn (LoCoMo, BEAM, LongMemEval, OpenAI chat files)."""
    REASONING = "reasoning"
    """A model's thinking, as an imported agent transcript recorded it (text may be empty)."""
    SUMMARY = "summary"
    """Text an agent wrote about its own history (a compaction summary is lossy: see metadata)."""


def utc_now_iso() -> str:
    """Return the current UTC time as lexically sortable ISO-8601 with microseconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append. ``created_at`` defaults to now; ``metadata`` must be JSON-able."""

    session_id: str
    kind: str
    content: str = ""
    role: str | None = None
    name: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    step_index: int | None = None
    msg_index: int | None = None
    headline: str | None = None
    tool_call_id: str | None = None
    tool_input: Any = None
    tool_state: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None
    dedup_key: str | None = None
    searchable: bool = True
    """False keeps the row out of full-text search (recall-tool observations echo history)."""


@dataclass(frozen=True, slots=True)
class Event:
    """An event as stored, addressed by its immutable ``seq``.

    ``content`` is the full text for inline events and a bounded preview for events whose
    payload was externalized (``payload_sha256`` is then set; ``payload_size`` is in bytes).
    ``label`` is the deterministic extractive label written at append time.
    """

    seq: int
    session_id: str
    kind: str
    content: str
    role: str | None
    name: str | None
    agent_id: str | None
    run_id: str | None
    task_id: str | None
    step_index: int | None
    msg_index: int | None
    headline: str | None
    label: str | None
    tool_call_id: str | None
    tool_input: Any
    tool_state: str | None
    metadata: dict[str, Any]
    created_at: str
    dedup_key: str | None
    payload_sha256: str | None
    payload_size: int | None
    searchable: bool = True

    @property
    def is_externalized(self) -> bool:
        """Whether the full content lives in the payload store rather than the row."""
        return self.payload_sha256 is not None

    @classmethod
    def from_row(cls, row: Any) -> Event:
        """Build an event from a ``sqlite3.Row`` (or any mapping) of ``conversation_history``."""
        return cls(
            seq=row["seq"],
            session_id=row["session_id"],
            kind=row["kind"],
            content=row["content"] or "",
            role=row["role"],
            name=row["name"],
            agent_id=row["agent_id"],
            run_id=row["run_id"],
            task_id=row["task_id"],
            step_index=row["step_index"],
            msg_index=row["msg_index"],
            headline=row["headline"],
            label=row["label"],
            tool_call_id=row["tool_call_id"],
            tool_input=_loads(row["tool_input"]),
            tool_state=row["tool_state"],
            metadata=_loads(row["metadata"]) or {},
            created_at=row["created_at"],
            dedup_key=row["dedup_key"],
            payload_sha256=row["payload_sha256"],
            payload_size=row["payload_size"],
            searchable=bool(row["searchable"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the event as a JSON-able dict whose keys are the log's column names."""
        return {name: getattr(self, name) for name in self.__slots__}


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
