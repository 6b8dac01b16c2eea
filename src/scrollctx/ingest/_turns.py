"""How an imported chat turn becomes an event: the shared shape every importer follows.

Invariants (every importer goes through :class:`Conversation`):

- ``kind`` is ``conversation`` for chat turns; ``run_id`` is ``ingest``; ``task_id`` names the
  source conversation; ``session_id`` names one source session and is unique across sources.
- ``step_index`` is the 1-based chronological session number; ``msg_index`` is the 0-based
  chronological position within the conversation, monotone across its sessions.
- ``content`` reads ``[Session N | YYYY-MM-DD] speaker: text`` (``[Session N]`` when undated);
  ``metadata["date"]`` is ``YYYY-MM-DD`` when the session is dated.
- ``created_at`` is the session's timestamp plus the turn's position in seconds, so turns keep
  their order; an undated session inherits the last dated session's date (flagged
  ``date_inherited``) and continues its clock, and a conversation that starts undated uses
  1970-01-01 until a date appears, so ``created_at`` stays a deterministic function of the
  source.
- ``dedup_key`` is built from source ids only, so importing the same file twice adds nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.log import Kind, NewEvent

__all__ = [
    "RUN_ID",
    "Conversation",
    "SessionStamp",
    "natural_key",
    "parse_date",
    "require",
]

RUN_ID = "ingest"
_UNDATED = datetime(1970, 1, 1)
_DATE_FORMATS = (
    "%I:%M %p on %d %B, %Y",  # LoCoMo: 1:56 pm on 8 May, 2023
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: 2023/05/30 (Tue) 23:40
    "%B-%d-%Y",  # BEAM: March-15-2024
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d",
)


def parse_date(text: str) -> datetime | None:
    """Parse a source date in any of the benchmark formats; ``None`` if it is not one."""
    cleaned = " ".join(str(text).split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    return None


def require(record: Any, key: str, kind: type | tuple[type, ...], where: str, path: Path) -> Any:
    """Return ``record[key]`` if it exists with the expected type; else raise FormatError."""
    if not isinstance(record, Mapping):
        raise FormatError(f"{path}: {where} is not a JSON object", path=str(path))
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _types(kind):
        expected = " or ".join(t.__name__ for t in _types(kind))
        raise FormatError(
            f"{path}: {where} needs {key!r} as {expected}, found {type(value).__name__}",
            path=str(path),
        )
    return value


def _types(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


@dataclass(frozen=True, slots=True)
class SessionStamp:
    """A session's place in time: its 1-based number, its timestamp, and how it was dated.

    ``date`` and ``tag`` are derived once here rather than per turn (formatting dates is the
    costliest step of building events).
    """

    number: int
    when: datetime | None
    inherited: bool = False
    date: str | None = field(init=False)
    tag: str = field(init=False)

    def __post_init__(self) -> None:
        date = None if self.when is None else self.when.date().isoformat()
        tag = f"[Session {self.number}]" if date is None else f"[Session {self.number} | {date}]"
        object.__setattr__(self, "date", date)
        object.__setattr__(self, "tag", tag)


@dataclass(slots=True)
class Conversation:
    """Numbers the turns of one source conversation and builds their events."""

    task_id: str
    source: str
    msg_index: int = 0
    sessions: int = 0
    last_when: datetime | None = None
    _offset: int = field(default=0)

    def session(self, when: datetime | None, number: int | None = None) -> SessionStamp:
        """Start the next session (or session ``number``); an undated one inherits a date."""
        self.sessions = self.sessions + 1 if number is None else number
        if when is not None:
            self.last_when = when
            self._offset = 0
            return SessionStamp(self.sessions, when)
        # An undated session continues the clock of the one before it, so order survives.
        return SessionStamp(self.sessions, self.last_when, inherited=self.last_when is not None)

    def event(
        self,
        stamp: SessionStamp,
        session_id: str,
        dedup_key: str,
        *,
        role: str,
        speaker: str,
        text: str,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        kind: str = Kind.CONVERSATION,
        tool_call_id: str | None = None,
        tool_input: Any = None,
    ) -> NewEvent:
        """Build the next turn's event; advances ``msg_index``."""
        meta: dict[str, Any] = {"source": self.source}
        if stamp.date is not None:
            meta["date"] = stamp.date
        if stamp.inherited:
            meta["date_inherited"] = True
        meta.update(metadata or {})
        when = (stamp.when or _UNDATED) + timedelta(seconds=self._offset)
        event = NewEvent(
            session_id=session_id,
            kind=kind,
            content=f"{stamp.tag} {speaker}: {text}",
            role=role,
            name=name,
            run_id=RUN_ID,
            task_id=self.task_id,
            step_index=stamp.number,
            msg_index=self.msg_index,
            tool_call_id=tool_call_id,
            tool_input=tool_input,
            metadata=meta,
            created_at=when.isoformat(timespec="microseconds") + "Z",
            dedup_key=dedup_key,
        )
        self.msg_index += 1
        self._offset += 1
        return event


def natural_key(text: str) -> list[Any]:
    """Sort key that orders ``2`` before ``10`` inside names and paths."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text)]
