"""How a record of a coding agent's transcript becomes an event: the shape importers share.

Invariants (Claude Code, Codex, Gemini CLI, ChatGPT export and Aider all build through
:class:`SessionEvents`):

- Kinds are the agent loop's own: ``user_message`` (a person typed it), ``model_turn`` (the
  model's text), ``reasoning`` (its thinking), ``tool_call`` / ``tool_result`` (paired by
  ``tool_call_id``), ``summary`` (text the agent wrote about its own history) and ``system``
  (harness records: hooks, snapshots, settings, token counts). ``run_id`` is ``ingest``.
- ``content`` is the source text exactly, with no prefix; records that are noise for search
  (harness bookkeeping) are kept with ``searchable=False``.
- ``metadata`` always has ``source`` (the format), ``record_type`` (the source record's type),
  ``date`` (``YYYY-MM-DD`` of ``created_at``) and the session's lineage keys (see
  :data:`SESSION_KEYS`); ``created_at`` is the record's own timestamp in UTC.
- ``dedup_key`` is derived from the record (its id, or a hash of its content plus how many
  identical records came before it), never from a line number, so a re-read of a grown or
  rewritten file adds only what is new.
- What an importer does not map is a :class:`Skip`: counted by record type, and reported with
  its line when it is a problem (an unknown record type, a line that is not JSON).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from scrollctx.ingest._tail import JsonlTail, Line
from scrollctx.log import Kind, NewEvent

__all__ = [
    "SESSION_KEYS",
    "Follower",
    "Item",
    "Keys",
    "SessionEvents",
    "Skip",
    "iso_utc",
    "read_records",
    "text_of_blocks",
]

RUN_ID = "ingest"

SESSION_KEYS = (
    "source",
    "project",
    "cwd",
    "git_branch",
    "model",
    "agent_kind",
    "subagent_type",
    "parent_session_id",
    "parent_tool_call_id",
    "title",
    "branch_of",
    "branch_point",
    "source_file",
)
"""Session metadata keys, the same in every format (absent when the source has no such fact)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """A source record that became no event: why, where, and whether that is a problem.

    ``reason`` is ``None`` for a deliberate skip (a mirror of a record imported elsewhere);
    otherwise the record was not understood and the reason is reported with its line.
    """

    record_type: str
    line: int | None = None
    reason: str | None = None


Item = NewEvent | Skip


class Follower(Protocol):
    """Reads what one file gained since its last call; ``final``: the file is complete.

    ``replaced`` turns true when the file was replaced under it; it then reads nothing more,
    and the caller starts a new follower on the new file.
    """

    @property
    def replaced(self) -> bool: ...

    def read(self, *, final: bool) -> Iterator[Item]: ...


def read_records(tail: JsonlTail, *, final: bool) -> Iterator[Line | Skip]:
    """The tail's new lines that hold a record, and a :class:`Skip` for each unreadable one."""
    for line in tail.read(final=final):
        if line.problem is not None:
            yield Skip("unreadable line", line.number, line.problem)
        elif line.value is not None:
            yield line


def iso_utc(value: Any) -> str | None:
    """Return ``value`` (ISO-8601 text or epoch seconds) as the log's UTC ISO form, else None."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            when = datetime.fromtimestamp(value, UTC)
        elif isinstance(value, str):
            when = datetime.fromisoformat(value.strip())
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def text_of_blocks(content: Any) -> str:
    """The text of a string or of a list of content blocks (non-text blocks as ``[type]``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'block')}]")
        else:
            parts.append(str(block))
    return "\n".join(parts)


@dataclass(slots=True)
class Keys:
    """Dedup keys from record content: a hash, suffixed ``#n`` for the n-th identical record."""

    seen: Counter[str] = field(default_factory=Counter)

    def of(self, prefix: str, value: Any) -> str:
        """Return the key for ``value``; the same value again gets the next ``#n``."""
        data = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        key = f"{prefix}:{hashlib.sha256(data.encode()).hexdigest()[:20]}"
        self.seen[key] += 1
        count = self.seen[key]
        return key if count == 1 else f"{key}#{count}"


@dataclass(slots=True)
class SessionEvents:
    """Builds the events of one session (one agent in it); numbers them in arrival order.

    ``lineage`` holds the session's :data:`SESSION_KEYS` values; ``step_index`` counts the
    person's prompts (0 before the first), ``msg_index`` the session's events from 0.
    """

    source: str
    session_id: str
    task_id: str
    agent_id: str | None = None
    lineage: dict[str, Any] = field(default_factory=dict)
    msg_index: int = 0
    step: int = 0
    last_created: str | None = None

    def event(
        self,
        kind: str,
        content: str,
        *,
        key: str,
        record_type: str,
        created_at: str | None,
        role: str | None = None,
        name: str | None = None,
        tool_call_id: str | None = None,
        tool_input: Any = None,
        searchable: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> NewEvent:
        """Build the session's next event (``created_at`` None: the previous event's time)."""
        if kind == Kind.USER_MESSAGE:
            self.step += 1
        when = created_at or self.last_created or "1970-01-01T00:00:00.000000Z"
        self.last_created = when
        meta: dict[str, Any] = {"source": self.source, "record_type": record_type}
        meta.update({k: v for k, v in self.lineage.items() if v is not None})
        meta["date"] = when[:10]
        meta.update(metadata or {})
        event = NewEvent(
            session_id=self.session_id,
            kind=kind,
            content=content,
            role=role,
            name=name,
            agent_id=self.agent_id,
            run_id=RUN_ID,
            task_id=self.task_id,
            step_index=self.step,
            msg_index=self.msg_index,
            tool_call_id=tool_call_id,
            tool_input=tool_input,
            metadata=meta,
            created_at=when,
            dedup_key=key,
            searchable=searchable,
        )
        self.msg_index += 1
        return event
