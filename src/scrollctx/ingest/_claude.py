"""Claude Code importer: ``~/.claude/projects/<project>/<session>.jsonl`` and its sub-agent files.

Mapping (documented in docs/ingest.md, "Claude Code"):

- ``session_id`` ``claude-code:<sessionId>`` (sub-agents carry the parent's); ``task_id``
  ``claude-code/<project folder>``; the main agent has ``agent_id`` None, a sub-agent its
  ``agentId`` (file layouts) or ``sidechain-<root uuid>`` (inline ``isSidechain`` records).
- One event per content block. An assistant API message written over several lines (one
  block each, same ``message.id``) gives one event per distinct block, keyed by the message
  id and the block. Each line repeats the message's ``usage`` as it grows while streaming;
  every row keeps its line's ``metadata.message`` (with ``usage``) and the message's usage is
  the one on its last row (docs/ingest.md has the SQL that counts each message once).
- ``text`` -> ``model_turn``; ``thinking`` -> ``reasoning`` (the signature kept even when the
  text is empty); ``tool_use`` -> ``tool_call``; ``tool_result`` -> ``tool_result`` with the
  same ``tool_call_id`` (pairing by tool-use id, never by ``parentUuid``); a line's
  ``toolUseResult`` -> a companion ``system`` event (same ``tool_call_id``, not searchable).
- Typed prompts -> ``user_message``; ``isMeta`` messages -> ``system`` (not searchable);
  the compaction summary (``isCompactSummary``) and ``away_summary`` -> ``summary`` marked
  ``lossy_summary``; ``summary`` title lines -> ``summary`` (``summary_of: title``).
- ``system``, ``attachment``, ``progress``, ``file-history-snapshot``, ``queue-operation``,
  ``permission-mode``, ``last-prompt`` records -> ``system`` events, not searchable, their
  fields kept in ``metadata.record``. Any other record type or block type is a :class:`Skip`
  reported with its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.ingest._claude_links import (
    SPAWN_TOOLS,
    find_spawning_call,
    parent_file,
    read_agent_meta,
)
from scrollctx.ingest._jsonstream import Sample
from scrollctx.ingest._tail import JsonlTail, Line
from scrollctx.ingest._transcript import (
    Item,
    Keys,
    SessionEvents,
    Skip,
    iso_utc,
    read_records,
    text_of_blocks,
)
from scrollctx.log import Kind

__all__ = ["ClaudeFile", "read_claude", "sniff_claude"]

SOURCE = "claude-code"
_HARNESS = (
    "system",
    "attachment",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "last-prompt",
)
_RECORD_TYPES = ("user", "assistant", "summary", *_HARNESS)
# Envelope fields mapped to columns or lineage; every other field is kept in metadata.record.
_ENVELOPE = frozenset(
    {
        "type",
        "uuid",
        "parentUuid",
        "sessionId",
        "timestamp",
        "cwd",
        "gitBranch",
        "version",
        "isSidechain",
        "agentId",
        "userType",
        "message",
        "toolUseResult",
    }
)
_SUBAGENT_META_KEYS = frozenset({"agentType", "description", "worktreePath"})


def sniff_claude(sample: Sample) -> bool:
    """JSONL whose first record is a Claude Code record, or a sub-agent's ``.meta.json``."""
    first = sample.first
    if sample.shape != "array" and _is_agent_meta(first):
        return True
    return (
        sample.shape == "jsonl"
        and isinstance(first, dict)
        and first.get("type") in _RECORD_TYPES
        and any(key in first for key in ("sessionId", "uuid", "leafUuid", "messageId"))
    )


def read_claude(path: Path, sample: Sample) -> Iterator[Item]:
    """Yield every event of the file (a ``.meta.json`` yields none: its agent file reads it)."""
    if _is_agent_meta(sample.first):
        return iter(())
    return ClaudeFile(path).read(final=True)


def _is_agent_meta(value: Any) -> bool:
    return isinstance(value, dict) and "agentType" in value and set(value) <= _SUBAGENT_META_KEYS


@dataclass(slots=True)
class _Agent:
    """One agent inside a file: its event builder and whether its link was resolved."""

    events: SessionEvents
    linked: bool = False


@dataclass(slots=True)
class ClaudeFile:
    """Follows one Claude Code JSONL file; :meth:`read` yields what was completed since."""

    path: Path
    tail: JsonlTail = field(init=False)
    keys: Keys = field(default_factory=Keys)
    session_id: str | None = None
    agents: dict[tuple[str, str | None], _Agent] = field(default_factory=dict)
    held: list[Line] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)
    spawn_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    sidechains: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tail = JsonlTail(self.path)

    @property
    def project(self) -> str:
        folder = self.path.parent
        return folder.parent.parent.name if folder.name == "subagents" else folder.name

    @property
    def replaced(self) -> bool:
        """Whether the file was replaced under this reader (see :class:`JsonlTail`)."""
        return self.tail.replaced

    def read(self, *, final: bool) -> Iterator[Item]:
        """Yield the events (and skips) of the lines completed since the last call."""
        for line in read_records(self.tail, final=final):
            if isinstance(line, Skip):
                yield line
            else:
                yield from self._line(line)
        if final and self.held:
            # No record ever named the session: it is the file's (Claude names files by it).
            self.session_id = self.path.stem
            yield from self._release()

    def _line(self, line: Line) -> Iterator[Item]:
        record = line.value or {}
        if isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        if self.session_id is None:
            self.held.append(line)
            return
        if self.held:
            # Held records (1.0.x files open with undated summary lines) take this one's time.
            events = self._agent(record)
            events.last_created = events.last_created or iso_utc(record.get("timestamp"))
        yield from self._release()
        yield from self._record(line.number, record)

    def _release(self) -> Iterator[Item]:
        held, self.held = self.held, []
        for line in held:
            yield from self._record(line.number, line.value or {})

    def _record(self, number: int, record: dict[str, Any]) -> Iterator[Item]:
        rtype = record.get("type")
        if rtype not in _RECORD_TYPES:
            yield Skip(
                str(rtype), number, f"unknown Claude Code record type {rtype!r}; not imported"
            )
            return
        agent = self._agent(record)
        if rtype == "user":
            yield from self._user(agent, number, record)
        elif rtype == "assistant":
            yield from self._assistant(agent, number, record)
        elif rtype == "summary":
            yield self._summary_title(agent, record)
        else:
            yield self._harness(agent, str(rtype), record)

    # -- agents ---------------------------------------------------------------------------

    def _agent(self, record: dict[str, Any]) -> SessionEvents:
        session_id = str(record.get("sessionId") or self.session_id or self.path.stem)
        agent_id = self._agent_id(record)
        key = (session_id, agent_id)
        if key not in self.agents:
            self.agents[key] = _Agent(self._new_agent(session_id, agent_id, record))
        events = self.agents[key].events
        if isinstance(record.get("cwd"), str):
            events.lineage["cwd"] = record["cwd"]
        if isinstance(record.get("gitBranch"), str):
            events.lineage["git_branch"] = record["gitBranch"]
        return events

    def _agent_id(self, record: dict[str, Any]) -> str | None:
        if isinstance(record.get("agentId"), str):
            return str(record["agentId"])
        if not record.get("isSidechain"):
            return None
        uuid, parent = str(record.get("uuid")), record.get("parentUuid")
        agent_id = self.sidechains.get(str(parent)) if parent else None
        # A sidechain record whose parent was not seen starts its own chain (never guessed).
        agent_id = agent_id or f"sidechain-{uuid}"
        self.sidechains[uuid] = agent_id
        return agent_id

    def _new_agent(
        self, session_id: str, agent_id: str | None, record: dict[str, Any]
    ) -> SessionEvents:
        lineage: dict[str, Any] = {
            "project": self.project,
            "agent_kind": "main" if agent_id is None else "subagent",
            "source_file": str(self.path),
        }
        if agent_id is not None:
            lineage["parent_session_id"] = f"{SOURCE}:{session_id}"
            lineage.update(self._spawn_link(session_id, agent_id, record))
        return SessionEvents(
            SOURCE, f"{SOURCE}:{session_id}", f"{SOURCE}/{self.project}", agent_id, lineage
        )

    def _spawn_link(self, session_id: str, agent_id: str, record: dict[str, Any]) -> dict[str, Any]:
        prompt = _root_prompt(record)
        if agent_id.startswith("sidechain-"):
            calls = [cid for cid, inp in self.spawn_calls.items() if inp.get("prompt") == prompt]
            call_id = calls[0] if len(calls) == 1 else None
            subagent_type = self.spawn_calls.get(call_id or "", {}).get("subagent_type")
            return {"parent_tool_call_id": call_id, "subagent_type": subagent_type}
        meta = read_agent_meta(self.path)
        parent = parent_file(self.path, session_id)
        call_id = find_spawning_call(parent, agent_id, prompt) if parent else None
        return {
            "parent_tool_call_id": call_id,
            "subagent_type": meta.agent_type,
            "subagent_description": meta.description,
            "worktree_path": meta.worktree_path,
        }

    # -- record types ---------------------------------------------------------------------

    def _user(self, s: SessionEvents, number: int, record: dict[str, Any]) -> Iterator[Item]:
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        base = _base_meta(record)
        when = iso_utc(record.get("timestamp"))
        uuid = str(record.get("uuid"))
        if record.get("isCompactSummary"):
            marks = {"lossy_summary": True, "summary_of": "compaction", "summary_author": "agent"}
            marks["compact_boundary_uuid"] = record.get("parentUuid")
            yield s.event(
                Kind.SUMMARY,
                text_of_blocks(content),
                key=f"{uuid}:0",
                record_type="user",
                created_at=when,
                role="user",
                metadata={**base, **marks},
            )
            return
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            yield Skip("user", number, "user record without message content; not imported")
            return
        meta_kind = Kind.SYSTEM if record.get("isMeta") else Kind.USER_MESSAGE
        for index, block in enumerate(blocks):
            btype = block.get("type") if isinstance(block, dict) else None
            key = f"{uuid}:{index}"
            if btype == "tool_result":
                yield from self._tool_result(s, record, block, key, when, base)
            elif btype in ("text", "image"):
                text = text_of_blocks([block])
                extra = {"block": block} if btype == "image" else {}
                yield s.event(
                    meta_kind,
                    text,
                    key=key,
                    record_type="user",
                    created_at=when,
                    role="user",
                    searchable=meta_kind == Kind.USER_MESSAGE,
                    metadata={**base, **extra},
                )
            else:
                yield Skip(f"user block {btype}", number, f"unknown user block type {btype!r}")

    def _tool_result(
        self,
        s: SessionEvents,
        record: dict[str, Any],
        block: dict[str, Any],
        key: str,
        when: str | None,
        base: dict[str, Any],
    ) -> Iterator[Item]:
        call_id = str(block.get("tool_use_id"))
        name = self.tool_names.get(call_id)
        result = record.get("toolUseResult")
        meta = {**base, "is_error": bool(block.get("is_error"))}
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            meta["subagent_id"] = result["agentId"]
        yield s.event(
            Kind.TOOL_RESULT,
            text_of_blocks(block.get("content")),
            key=key,
            record_type="user",
            created_at=when,
            role="tool",
            name=name,
            tool_call_id=call_id,
            metadata=meta,
        )
        if "toolUseResult" in record:
            yield s.event(
                Kind.SYSTEM,
                json.dumps(result, ensure_ascii=False),
                key=f"{key}:toolUseResult",
                record_type="toolUseResult",
                created_at=when,
                role="tool",
                name=name,
                tool_call_id=call_id,
                searchable=False,
                metadata={"uuid": base.get("uuid")},
            )

    def _assistant(self, s: SessionEvents, number: int, record: dict[str, Any]) -> Iterator[Item]:
        message = record.get("message")
        if not isinstance(message, dict):
            yield Skip("assistant", number, "assistant record without a message; not imported")
            return
        message_id = str(message.get("id") or record.get("uuid"))
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        # Each line of a message repeats its usage, growing as it streams: the message's usage
        # is the one on its last line, so every row keeps its own and readers take the last.
        info = {k: v for k, v in message.items() if k != "content"}
        if isinstance(message.get("model"), str):
            s.lineage["model"] = message["model"]
        base = {**_base_meta(record), "message": info}
        when = iso_utc(record.get("timestamp"))
        for block in blocks if isinstance(blocks, list) else []:
            item = self._assistant_block(s, number, message_id, block, when, base)
            if item is not None:
                yield item

    def _assistant_block(
        self,
        s: SessionEvents,
        number: int,
        message_id: str,
        block: Any,
        when: str | None,
        base: dict[str, Any],
    ) -> Item | None:
        btype = block.get("type") if isinstance(block, dict) else None
        common: dict[str, Any] = {"record_type": "assistant", "created_at": when}
        common["role"] = "assistant"
        if btype == "text":
            key = self.keys.of(message_id, block)
            text = str(block.get("text", ""))
            return s.event(Kind.MODEL_TURN, text, key=key, metadata=base, **common)
        if btype in ("thinking", "redacted_thinking"):
            meta = {**base, "signature": block.get("signature"), "block_type": btype}
            if btype == "redacted_thinking":
                meta["data"] = block.get("data")
            key = self.keys.of(message_id, block)
            text = str(block.get("thinking") or "")
            return s.event(Kind.REASONING, text, key=key, metadata=meta, **common)
        if btype == "tool_use":
            call_id, name = str(block.get("id")), str(block.get("name"))
            tool_input = block.get("input")
            self.tool_names[call_id] = name
            if name in SPAWN_TOOLS and isinstance(tool_input, dict):
                self.spawn_calls[call_id] = tool_input
            text = f"{name} {json.dumps(tool_input, ensure_ascii=False)}"
            return s.event(
                Kind.TOOL_CALL,
                text,
                key=call_id,
                name=name,
                tool_call_id=call_id,
                tool_input=tool_input,
                metadata=base,
                **common,
            )
        return Skip(f"assistant block {btype}", number, f"unknown assistant block type {btype!r}")

    def _summary_title(self, s: SessionEvents, record: dict[str, Any]) -> Item:
        return s.event(
            Kind.SUMMARY,
            str(record.get("summary", "")),
            key=self.keys.of("summary", record),
            record_type="summary",
            created_at=None,
            role="system",
            metadata={"summary_of": "title", "leaf_uuid": record.get("leafUuid")},
        )

    def _harness(self, s: SessionEvents, rtype: str, record: dict[str, Any]) -> Item:
        subtype = record.get("subtype")
        kind, searchable = Kind.SYSTEM, False
        meta: dict[str, Any] = {**_base_meta(record), "subtype": subtype}
        if rtype == "system" and subtype == "away_summary":
            kind, searchable = Kind.SUMMARY, True
            meta.update(lossy_summary=True, summary_of="away", summary_author="agent")
        key = str(record["uuid"]) if isinstance(record.get("uuid"), str) else None
        return s.event(
            kind,
            _harness_text(rtype, record),
            key=key or self.keys.of(rtype, record),
            record_type=rtype if subtype is None else f"{rtype}/{subtype}",
            created_at=iso_utc(record.get("timestamp")),
            role="system",
            searchable=searchable,
            metadata=meta,
        )


def _base_meta(record: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"uuid": record.get("uuid"), "parent_uuid": record.get("parentUuid")}
    if "version" in record:
        meta["version"] = record["version"]
    rest = {k: v for k, v in record.items() if k not in _ENVELOPE}
    if rest:
        meta["record"] = rest
    return meta


def _harness_text(rtype: str, record: dict[str, Any]) -> str:
    for key in ("content", "lastPrompt", "permissionMode"):
        if isinstance(record.get(key), str):
            return str(record[key])
    inner = record.get("attachment") or record.get("data") or record.get("snapshot")
    if isinstance(inner, dict) and isinstance(inner.get("content"), str):
        return str(inner["content"])
    return rtype if inner is None else json.dumps(inner, ensure_ascii=False)


def _root_prompt(record: dict[str, Any]) -> str | None:
    if record.get("parentUuid") is not None:
        return None
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return text_of_blocks(content) if content is not None else None
