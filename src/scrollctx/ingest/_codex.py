"""Codex CLI importer: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`` (the envelope format).

Each line is ``{timestamp, type, payload}`` (CLI 0.58 and 0.125 seen). Mapping (documented in
docs/ingest.md, "Codex CLI"):

- ``session_id`` ``codex:<session_meta.id>``, ``task_id`` ``codex/<cwd>``, ``agent_id`` None.
- ``response_item`` is the model-visible history: ``message`` -> ``user_message`` (a user
  message whose text the ``event_msg/user_message`` that follows repeats: what the person
  typed), ``system`` (other user and developer messages: injected instructions and
  environment, not searchable) or ``model_turn`` (assistant, ``phase`` kept); ``reasoning`` ->
  ``reasoning`` (summary text; the encrypted content kept in metadata); ``function_call`` /
  ``custom_tool_call`` / ``web_search_call`` -> ``tool_call``; ``*_output`` -> ``tool_result``
  paired by ``call_id``, with ``exit_code`` in metadata when the output states it;
  ``ghost_snapshot`` -> ``system``.
- ``event_msg`` mirrors (``user_message``, ``agent_message``, ``agent_reasoning``,
  ``web_search_end``) are skipped when their response item is there (either order); a mirror
  whose item never appears is imported in its place once the file is read to its end.
  ``exec_command_end`` / ``patch_apply_end`` become a ``tool_result`` only when the call's
  output lacked an exit code (unified exec's "Process running…"); otherwise they are skipped
  as mirrors. ``token_count``, ``task_started``, ``task_complete`` -> ``system`` (token counts
  in metadata). ``session_meta`` / ``turn_context`` -> ``system``; they set cwd, branch, model.
- Anything else is a :class:`Skip` reported with its line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.ingest._jsonstream import Sample, loads
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

__all__ = ["CodexFile", "read_codex", "sniff_codex"]

SOURCE = "codex"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_MIRRORS = {"agent_message": Kind.MODEL_TURN, "agent_reasoning": Kind.REASONING}
_MIRROR_OF = {Kind.USER_MESSAGE: "user_message", **{kind: t for t, kind in _MIRRORS.items()}}
_LATER = "imported when the file grows (import it again)"
_BOOKKEEPING = ("token_count", "task_started", "task_complete")
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def sniff_codex(sample: Sample) -> bool:
    """JSONL whose first record is a ``session_meta`` envelope with a session id."""
    first = sample.first
    payload = first.get("payload") if isinstance(first, dict) else None
    return (
        sample.shape == "jsonl"
        and isinstance(first, dict)
        and first.get("type") == "session_meta"
        and isinstance(payload, dict)
        and isinstance(payload.get("id"), str)
    )


def read_codex(path: Path, sample: Sample) -> Iterator[Item]:
    """Yield every event of the rollout file."""
    return CodexFile(path).read(final=True)


@dataclass(slots=True)
class _Mirror:
    kind: str
    text: str
    line: int
    when: str | None
    payload: dict[str, Any]


@dataclass(slots=True)
class CodexFile:
    """Follows one rollout file; :meth:`read` yields what was completed since the last call."""

    path: Path
    tail: JsonlTail = field(init=False)
    events: SessionEvents = field(init=False)
    keys: Keys = field(default_factory=Keys)
    tool_names: dict[str, str] = field(default_factory=dict)
    has_exit_code: set[str] = field(default_factory=set)
    said: dict[tuple[str, str], int] = field(default_factory=dict)
    mirrors: list[_Mirror] = field(default_factory=list)
    pending_user: tuple[Line, dict[str, Any]] | None = None
    search_ids: dict[str, str] = field(default_factory=dict)
    ends: dict[str, tuple[str, dict[str, Any], str | None]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.tail = JsonlTail(self.path)
        match = _UUID.search(self.path.stem)
        session = match.group(0) if match else self.path.stem
        self.events = SessionEvents(SOURCE, f"{SOURCE}:{session}", f"{SOURCE}/{session}")
        self.events.lineage.update(agent_kind="main", source_file=str(self.path))

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
        if final:
            yield from self._finish()

    def _finish(self) -> Iterator[Item]:
        """At the end of the file, what waits for a later line is reported, never guessed."""
        if self.pending_user is not None:
            reason = "a user message is told typed or injected by the line after it; " + _LATER
            yield Skip("response_item/message", self.pending_user[0].number, reason)
        for mirror in self.mirrors:
            reason = "a mirror whose response item is not written yet; " + _LATER
            yield Skip(f"event_msg/{mirror.payload.get('type')}", mirror.line, reason)
        ends, self.ends = self.ends, {}
        for rtype, payload, when in ends.values():
            yield self._end_result(rtype, payload, when)

    def _line(self, line: Line) -> Iterator[Item]:
        record = line.value or {}
        payload = record.get("payload")
        if not isinstance(payload, dict):
            yield Skip(str(record.get("type")), line.number, "a Codex line without a payload")
            return
        if self.pending_user is not None:
            yield from self._classify_user(line, payload)
        rtype, ptype = record.get("type"), payload.get("type")
        when = iso_utc(record.get("timestamp"))
        if rtype == "response_item":
            yield from self._response_item(line, str(ptype), payload, when)
        elif rtype == "event_msg":
            yield from self._event_msg(line, str(ptype), payload, when)
        elif rtype in ("session_meta", "turn_context"):
            yield self._context(str(rtype), payload, when)
        else:
            reason = f"unknown Codex record type {rtype!r}; not imported"
            yield Skip(str(rtype), line.number, reason)

    # -- user messages: typed (mirrored by event_msg/user_message) or injected --------------

    def _classify_user(self, line: Line, payload: dict[str, Any]) -> Iterator[Item]:
        held, held_payload = self.pending_user or (line, payload)
        self.pending_user = None
        text = _message_text(held_payload)
        if payload.get("type") == "user_message" and _same(payload.get("message"), text):
            yield self._typed(held, held_payload, text)
            self.said[(Kind.USER_MESSAGE, text.strip())] = 1
        else:
            yield self._injected(held, held_payload)

    def _typed(self, line: Line, payload: dict[str, Any], text: str) -> Item:
        return self.events.event(
            Kind.USER_MESSAGE,
            text,
            key=self.keys.of("message", [_when(line), payload]),
            record_type="response_item/message",
            created_at=_when(line),
            role="user",
            metadata={"content": payload.get("content")},
        )

    def _injected(self, line: Line, payload: dict[str, Any]) -> Item:
        return self.events.event(
            Kind.SYSTEM,
            _message_text(payload),
            key=self.keys.of("message", [_when(line), payload]),
            record_type="response_item/message",
            created_at=_when(line),
            role=str(payload.get("role")),
            searchable=False,
            metadata={"injected": True},
        )

    # -- response items ---------------------------------------------------------------------

    def _response_item(
        self, line: Line, ptype: str, payload: dict[str, Any], when: str | None
    ) -> Iterator[Item]:
        rtype = f"response_item/{ptype}"
        if ptype == "message":
            yield from self._message(line, payload, when)
        elif ptype == "reasoning":
            parts = [s.get("text", "") for s in payload.get("summary") or [] if isinstance(s, dict)]
            meta = {k: v for k, v in payload.items() if k not in ("type", "summary")}
            yield self.events.event(
                Kind.REASONING,
                "\n".join(parts),
                key=self.keys.of("reasoning", [when, payload]),
                record_type=rtype,
                created_at=when,
                role="assistant",
                metadata=meta,
            )
            yield from self._said(Kind.REASONING, parts)
        elif ptype in _CALLS or ptype == "web_search_call":
            yield self._call(ptype, payload, when)
        elif ptype in _OUTPUTS:
            yield from self._output(ptype, payload, when)
        elif ptype == "ghost_snapshot":
            yield self._bookkeeping(rtype, payload, when)
        else:
            yield Skip(rtype, line.number, f"unknown Codex response item {ptype!r}; not imported")

    def _message(self, line: Line, payload: dict[str, Any], when: str | None) -> Iterator[Item]:
        role, text = payload.get("role"), _message_text(payload)
        if role == "assistant":
            yield self.events.event(
                Kind.MODEL_TURN,
                text,
                key=self.keys.of("message", [when, payload]),
                record_type="response_item/message",
                created_at=when,
                role="assistant",
                metadata={"phase": payload.get("phase"), "content": payload.get("content")},
            )
            yield from self._said(Kind.MODEL_TURN, [text])
        elif role == "user" and self._take_mirror(Kind.USER_MESSAGE, text):
            yield self._typed(line, payload, text)
            yield Skip("event_msg/user_message")
        elif role == "user":
            yield from self._said(Kind.USER_MESSAGE, [])  # earlier unmatched mirrors: orphans
            self.pending_user = (line, payload)
        else:
            yield self._injected(line, payload)

    def _call(self, ptype: str, payload: dict[str, Any], when: str | None) -> Item:
        if ptype == "web_search_call":
            action = _dict(payload.get("action"))
            query = str(action.get("query", ""))
            call_id, name = self.search_ids.pop(query, None), "web_search"
            tool_input, text = action, query
        else:
            call_id, name = str(payload.get("call_id")), str(payload.get("name"))
            raw = payload.get("arguments", payload.get("input"))
            tool_input = _json_or_text(raw)
            shown = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
            text = _command_text(tool_input) or f"{name} {shown}"
            self.tool_names[call_id] = name
        meta = {
            k: v for k, v in payload.items() if k not in ("type", "arguments", "input", "action")
        }
        return self.events.event(
            Kind.TOOL_CALL,
            text,
            key=call_id or self.keys.of(ptype, [when, payload]),
            record_type=f"response_item/{ptype}",
            created_at=when,
            role="assistant",
            name=name,
            tool_call_id=call_id,
            tool_input=tool_input,
            metadata=meta,
        )

    def _output(self, ptype: str, payload: dict[str, Any], when: str | None) -> Iterator[Item]:
        call_id = str(payload.get("call_id"))
        text, meta = _parse_output(payload.get("output"))
        self.outputs.add(call_id)
        if "exit_code" in meta:
            self.has_exit_code.add(call_id)
        yield self.events.event(
            Kind.TOOL_RESULT,
            text,
            key=f"{call_id}:output",
            record_type=f"response_item/{ptype}",
            created_at=when,
            role="tool",
            name=self.tool_names.get(call_id),
            tool_call_id=call_id,
            metadata=meta,
        )
        if call_id in self.ends:
            rtype, end, end_when = self.ends.pop(call_id)
            yield Skip(rtype) if "exit_code" in meta else self._end_result(rtype, end, end_when)

    # -- event messages ---------------------------------------------------------------------

    def _event_msg(
        self, line: Line, ptype: str, payload: dict[str, Any], when: str | None
    ) -> Iterator[Item]:
        rtype = f"event_msg/{ptype}"
        if ptype == "user_message":
            text = str(payload.get("message", ""))
            yield from self._mirror(Kind.USER_MESSAGE, text, line, when, payload)
        elif ptype in _MIRRORS:
            text = str(payload.get("message", payload.get("text", "")))
            yield from self._mirror(_MIRRORS[ptype], text, line, when, payload)
        elif ptype == "web_search_end":
            action = _dict(payload.get("action"))
            query = str(action.get("query", payload.get("query", "")))
            self.search_ids[query] = str(payload.get("call_id"))
            yield Skip(rtype)
        elif ptype in ("exec_command_end", "patch_apply_end"):
            if (item := self._command_end(rtype, payload, when)) is not None:
                yield item
        elif ptype in _BOOKKEEPING:
            yield self._bookkeeping(rtype, payload, when)
        else:
            yield Skip(rtype, line.number, f"unknown Codex event message {ptype!r}; not imported")

    def _mirror(
        self, kind: str, text: str, line: Line, when: str | None, payload: dict[str, Any]
    ) -> Iterator[Item]:
        key = (kind, text.strip())
        if self.said.get(key, 0) > 0:
            self.said[key] -= 1
            yield Skip(f"event_msg/{payload.get('type')}")
        else:
            self.mirrors.append(_Mirror(kind, text, line.number, when, payload))

    def _said(self, kind: str, texts: list[str]) -> Iterator[Item]:
        """A response item said ``texts``: match its mirrors; earlier unmatched ones are orphans."""
        for text in texts:
            if self._take_mirror(kind, text):
                yield Skip(f"event_msg/{_MIRROR_OF[kind]}")
            else:
                key = (kind, text.strip())
                self.said[key] = self.said.get(key, 0) + 1
        orphans = [m for m in self.mirrors if m.kind == kind]
        self.mirrors = [m for m in self.mirrors if m.kind != kind]
        for mirror in orphans:  # its own item would have come before this one: there is none
            yield self.events.event(
                mirror.kind,
                mirror.text,
                key=self.keys.of("mirror", [mirror.when, mirror.payload]),
                record_type=f"event_msg/{mirror.payload.get('type')}",
                created_at=mirror.when,
                role="user" if mirror.kind == Kind.USER_MESSAGE else "assistant",
                metadata={"mirror_only": True, "payload": mirror.payload},
            )

    def _take_mirror(self, kind: str, text: str) -> bool:
        for index, mirror in enumerate(self.mirrors):
            if mirror.kind == kind and _same(mirror.text, text):
                del self.mirrors[index]
                return True
        return False

    def _command_end(self, rtype: str, payload: dict[str, Any], when: str | None) -> Item | None:
        """The end of a command is a mirror of its output, unless the output lacked the exit."""
        call_id = str(payload.get("call_id"))
        if call_id not in self.outputs:
            self.ends[call_id] = (rtype, payload, when)  # decided when the output arrives
            return None
        if call_id in self.has_exit_code:
            return Skip(rtype)
        return self._end_result(rtype, payload, when)

    def _end_result(self, rtype: str, payload: dict[str, Any], when: str | None) -> Item:
        call_id = str(payload.get("call_id"))
        output = payload.get("aggregated_output")
        if not isinstance(output, str):
            output = "".join(str(payload.get(k) or "") for k in ("stdout", "stderr"))
        meta = {k: v for k, v in payload.items() if k not in ("type", "aggregated_output")}
        if "success" in payload and "exit_code" not in meta:
            meta["exit_code"] = 0 if payload["success"] else 1
        self.has_exit_code.add(call_id)
        return self.events.event(
            Kind.TOOL_RESULT,
            output,
            key=f"{call_id}:end",
            record_type=rtype,
            created_at=when,
            role="tool",
            name=self.tool_names.get(call_id),
            tool_call_id=call_id,
            metadata={**meta, "final": True},
        )

    def _bookkeeping(self, rtype: str, payload: dict[str, Any], when: str | None) -> Item:
        body = {k: v for k, v in payload.items() if k != "type"}
        return self.events.event(
            Kind.SYSTEM,
            json.dumps(body, ensure_ascii=False),
            key=self.keys.of(rtype, [when, payload]),
            record_type=rtype,
            created_at=when,
            role="system",
            searchable=False,
            metadata=body,
        )

    def _context(self, rtype: str, payload: dict[str, Any], when: str | None) -> Item:
        lineage = self.events.lineage
        if rtype == "session_meta" and isinstance(payload.get("id"), str):
            self.events.session_id = f"{SOURCE}:{payload['id']}"
        if isinstance(payload.get("cwd"), str):
            lineage["cwd"] = lineage["project"] = payload["cwd"]
            self.events.task_id = f"{SOURCE}/{payload['cwd']}"
        git = payload.get("git")
        if isinstance(git, dict) and isinstance(git.get("branch"), str):
            lineage["git_branch"] = git["branch"]
        if isinstance(payload.get("model"), str):
            lineage["model"] = payload["model"]
        instructions = payload.get("base_instructions") or payload.get("instructions")
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        meta = {k: v for k, v in payload.items() if k not in ("base_instructions", "instructions")}
        return self.events.event(
            Kind.SYSTEM,
            instructions if isinstance(instructions, str) else "",
            key=self.keys.of(rtype, [when, meta]),
            record_type=rtype,
            created_at=when,
            role="system",
            searchable=False,
            metadata=meta,
        )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _message_text(payload: dict[str, Any]) -> str:
    return text_of_blocks(payload.get("content"))


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, str) and isinstance(b, str) and a.strip() == b.strip()


def _when(line: Line) -> str | None:
    return iso_utc((line.value or {}).get("timestamp"))


def _json_or_text(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return loads(raw)
    except json.JSONDecodeError:
        return raw


def _command_text(tool_input: Any) -> str | None:
    """The shell command a call runs (``shell``'s argv list or ``exec_command``'s ``cmd``)."""
    if not isinstance(tool_input, dict):
        return None
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        return command[-1] if command[:2] == ["bash", "-lc"] else " ".join(command)
    return command if isinstance(command, str) else None


def _parse_output(output: Any) -> tuple[str, dict[str, Any]]:
    """Split a call's output into its text and metadata (``exit_code`` when it says so)."""
    if not isinstance(output, str):
        return json.dumps(output, ensure_ascii=False), {}
    parsed = _json_or_text(output)
    if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
        meta = dict(parsed.get("metadata") or {})
        return parsed["output"], meta
    meta = {}
    if match := _EXIT.search(output):
        meta["exit_code"] = int(match.group(1))
    elif running := re.search(r"^Process running with session ID (\d+)$", output, re.MULTILINE):
        meta["running_session_id"] = running.group(1)
    return output, meta
