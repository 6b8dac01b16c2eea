"""Aider importer: ``.aider.chat.history.md``, the Markdown log aider appends in a repository.

Mapping (documented in docs/ingest.md, "Aider"):

- ``# aider chat started at YYYY-MM-DD HH:MM:SS`` starts a session ``aider:<folder>:<time>``
  (``task_id`` ``aider/<folder>``, the folder holding the file). The header time is local time
  with no zone: ``created_at`` reads it as UTC, advanced one second per event to keep order,
  and ``metadata.local_time`` says so.
- Consecutive ``#### `` lines -> one ``user_message``. Unprefixed text (fenced code included)
  -> ``model_turn``; each ``<<<<<<< SEARCH / ======= / >>>>>>> REPLACE`` block in it also ->
  a ``tool_call`` ``edit`` (``tool_input`` = ``{path, search, replace}``). Consecutive ``> ``
  lines (aider's console) -> one ``system`` event named ``aider`` (searchable: it holds shell
  output); in it, ``Applied edit to <path>`` -> a ``tool_result`` paired with that path's
  pending edit, and ``Commit <sha> <message>`` -> a ``system`` event named ``commit``.
- Aider writes no ids: ``dedup_key`` is a hash of the block plus its occurrence in the session.
  While following a live file the last block is held back until a line after it exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import Sample
from scrollctx.ingest._transcript import Item, Keys, SessionEvents
from scrollctx.log import Kind

__all__ = ["AiderFile", "read_aider", "sniff_aider"]

SOURCE = "aider"
_HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_EDIT = re.compile(
    r"^(?P<path>[^\n`]+)\n```[^\n]*\n<<<<<<< SEARCH\n(?P<search>.*?)^=======\n"
    r"(?P<replace>.*?)^>>>>>>> REPLACE",
    re.MULTILINE | re.DOTALL,
)
_APPLIED = re.compile(r"^Applied edit to (.+)$")
_COMMIT = re.compile(r"^Commit ([0-9a-f]{7,40}) (.*)$")


def sniff_aider(sample: Sample) -> bool:
    """Text whose first non-blank line is aider's session header."""
    if sample.shape != "text" or not isinstance(sample.first, str):
        return False
    lines = [line for line in sample.first.splitlines() if line.strip()]
    return bool(lines) and _HEADER.match(lines[0]) is not None


def read_aider(path: Path, sample: Sample) -> Iterator[Item]:
    """Yield every event of the history file."""
    return AiderFile(path).read(final=True)


@dataclass(slots=True)
class _Block:
    kind: str  # "user", "reply", "console"
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AiderFile:
    """Reads the whole file on each call; the store's dedup keys make a re-read add only news."""

    path: Path
    replaced: bool = False  # read whole each time: a replaced file needs no new reader

    def read(self, *, final: bool) -> Iterator[Item]:
        """Yield the events of every session (without the last block unless ``final``)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            message = f"cannot read {self.path} as UTF-8: {exc}"
            raise FormatError(message, path=str(self.path)) from exc
        sessions = _split_sessions(text)
        if not final and sessions and sessions[-1][1]:
            sessions[-1][1].pop()  # the writer may still be adding to it
        for started, blocks in sessions:
            yield from _Session(self.path, started).emit(blocks)


def _split_sessions(text: str) -> list[tuple[str, list[_Block]]]:
    sessions: list[tuple[str, list[_Block]]] = []
    fenced, gap = False, False
    for raw in text.splitlines():
        header = None if fenced else _HEADER.match(raw)
        if header:
            sessions.append((header.group(1), []))
            continue
        if not sessions:
            continue  # text before the first header belongs to no session
        blocks = sessions[-1][1]
        kind = "reply" if fenced else _line_kind(raw)
        if raw.strip().startswith("```") and kind == "reply":
            fenced = not fenced
        if kind == "blank":
            if blocks and blocks[-1].kind == "reply":
                blocks[-1].lines.append("")  # a reply's paragraphs stay one reply
            else:
                gap = True  # a blank line ends a prompt or a console block
            continue
        if gap or not blocks or blocks[-1].kind != kind:
            blocks.append(_Block(kind))
        gap = False
        blocks[-1].lines.append(_strip_prefix(raw, kind))
    return sessions


def _line_kind(line: str) -> str:
    if line.startswith("#### "):
        return "user"
    if line.startswith(">"):
        return "console"
    return "blank" if not line.strip() else "reply"


def _strip_prefix(line: str, kind: str) -> str:
    if kind == "user":
        return line[5:].rstrip()
    if kind == "console":
        return line[1:].strip()
    return line


@dataclass(slots=True)
class _Session:
    path: Path
    started: str
    keys: Keys = field(default_factory=Keys)
    pending_edits: dict[str, list[str]] = field(default_factory=dict)
    events: SessionEvents = field(init=False)
    clock: datetime = field(init=False)

    def __post_init__(self) -> None:
        project = self.path.resolve().parent.name
        self.events = SessionEvents(
            SOURCE, f"{SOURCE}:{project}:{self.started.replace(' ', 'T')}", f"{SOURCE}/{project}",
            None, {"project": project, "agent_kind": "main", "source_file": str(self.path)},
        )  # fmt: skip
        self.clock = datetime.fromisoformat(self.started)

    def emit(self, blocks: list[_Block]) -> Iterator[Item]:
        """Yield the events of the session's blocks, in order."""
        for block in blocks:
            text = "\n".join(block.lines).strip("\n")
            if block.kind == "user":
                yield self._event(Kind.USER_MESSAGE, text, "user", role="user")
            elif block.kind == "reply":
                yield self._event(Kind.MODEL_TURN, text, "reply", role="assistant")
                yield from self._edits(text)
            else:
                yield from self._console(block.lines, text)

    def _event(self, kind: str, text: str, record_type: str, **fields: Any) -> Item:
        when = self.clock.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.clock += timedelta(seconds=1)
        metadata = {"local_time": True, **fields.pop("metadata", {})}
        return self.events.event(
            kind, text, key=self.keys.of(kind, text), record_type=record_type, created_at=when,
            metadata=metadata, **fields,
        )  # fmt: skip

    def _edits(self, reply: str) -> Iterator[Item]:
        for match in _EDIT.finditer(reply):
            path = match.group("path").strip()
            edit = {
                "path": path,
                "search": match.group("search"),
                "replace": match.group("replace"),
            }
            call_id = self.keys.of("edit", edit)
            self.pending_edits.setdefault(path, []).append(call_id)
            yield self._event(
                Kind.TOOL_CALL, match.group(0), "edit", role="assistant", name="edit",
                tool_call_id=call_id, tool_input=edit,
            )  # fmt: skip

    def _console(self, lines: list[str], text: str) -> Iterator[Item]:
        yield self._event(Kind.SYSTEM, text, "console", role="tool", name="aider")
        for line in lines:
            if applied := _APPLIED.match(line):
                path = applied.group(1).strip()
                waiting = self.pending_edits.get(path) or []
                call_id = waiting.pop(0) if waiting else None  # an edit made outside the chat
                yield self._event(
                    Kind.TOOL_RESULT, line, "applied", role="tool", name="edit",
                    tool_call_id=call_id, metadata={"path": path},
                )  # fmt: skip
            elif commit := _COMMIT.match(line):
                meta = {"commit": commit.group(1), "commit_message": commit.group(2)}
                yield self._event(
                    Kind.SYSTEM, line, "commit", role="tool", name="commit", metadata=meta
                )
