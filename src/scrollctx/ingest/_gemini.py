"""Gemini CLI importer: one session JSON object (``~/.gemini/tmp/<hash>/chats/session-*.json``).

Mapping (documented in docs/ingest.md, "Gemini CLI"):

- ``session_id`` ``gemini-cli:<sessionId>``, ``task_id`` ``gemini-cli/<projectHash>``,
  ``agent_id`` None; ``project`` is the project hash (the CLI stores no path).
- A ``user`` message -> ``user_message``. A ``gemini`` message -> one ``reasoning`` event per
  thought (``subject: description``), a ``model_turn`` for its text when it has any, and for
  each tool call a ``tool_call`` (``tool_call_id`` = its id, ``tool_input`` = ``args``) and the
  ``tool_result`` it embeds (the ``functionResponse`` output, else ``resultDisplay``). The
  message's ``tokens`` and ``model`` go in the metadata of its first event.
- Any other message type is a :class:`Skip` reported with its position.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scrollctx.ingest._jsonstream import Sample
from scrollctx.ingest._transcript import Item, SessionEvents, Skip, iso_utc
from scrollctx.log import Kind

__all__ = ["read_gemini", "sniff_gemini"]

SOURCE = "gemini-cli"


def sniff_gemini(sample: Sample) -> bool:
    """One JSON object with ``sessionId``, ``projectHash`` and a ``messages`` list."""
    first = sample.first
    return (
        sample.shape in ("object", "jsonl")
        and isinstance(first, dict)
        and isinstance(first.get("sessionId"), str)
        and "projectHash" in first
        and isinstance(first.get("messages"), list)
    )


def read_gemini(path: Path, sample: Sample) -> Iterator[Item]:
    """Yield every event of the session file."""
    session = sample.first
    project = str(session.get("projectHash"))
    events = SessionEvents(
        SOURCE, f"{SOURCE}:{session['sessionId']}", f"{SOURCE}/{project}", None,
        {"project": project, "agent_kind": "main", "source_file": str(path)},
    )  # fmt: skip
    for number, message in enumerate(session["messages"], start=1):
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "user":
            yield _user(events, message)
        elif kind == "gemini":
            yield from _gemini(events, message)
        else:
            yield Skip(f"message {kind}", number, f"unknown Gemini CLI message type {kind!r}")


def _user(events: SessionEvents, message: dict[str, Any]) -> Item:
    return events.event(
        Kind.USER_MESSAGE, _text(message.get("content")), key=f"{message.get('id')}:text",
        record_type="user", created_at=iso_utc(message.get("timestamp")), role="user",
        metadata={"message_id": message.get("id")},
    )  # fmt: skip


def _gemini(events: SessionEvents, message: dict[str, Any]) -> Iterator[Item]:
    mid, when = message.get("id"), iso_utc(message.get("timestamp"))
    if isinstance(message.get("model"), str):
        events.lineage["model"] = message["model"]
    first = {"message_id": mid, "tokens": message.get("tokens")}
    common: dict[str, Any] = {"record_type": "gemini", "role": "assistant"}
    for index, thought in enumerate(message.get("thoughts") or []):
        text = f"{thought.get('subject', '')}: {thought.get('description', '')}"
        meta = {**first, "subject": thought.get("subject")}
        created = iso_utc(thought.get("timestamp")) or when
        yield events.event(
            Kind.REASONING, text, key=f"{mid}:thought{index}", created_at=created,
            metadata=meta, **common,
        )  # fmt: skip
        first = {"message_id": mid}
    if _text(message.get("content")):
        yield events.event(
            Kind.MODEL_TURN, _text(message.get("content")), key=f"{mid}:text", created_at=when,
            metadata=first, **common,
        )  # fmt: skip
        first = {"message_id": mid}
    for call in message.get("toolCalls") or []:
        yield from _tool(events, call, iso_utc(call.get("timestamp")) or when, first)
        first = {"message_id": mid}


def _tool(
    events: SessionEvents, call: dict[str, Any], when: str | None, meta: dict[str, Any]
) -> Iterator[Item]:
    call_id, name = str(call.get("id")), str(call.get("name"))
    args = call.get("args")
    described: dict[str, Any] = {
        k: call.get(k) for k in ("displayName", "description", "status") if k in call
    }
    yield events.event(
        Kind.TOOL_CALL, f"{name} {json.dumps(args, ensure_ascii=False)}", key=call_id,
        record_type="gemini/toolCall", created_at=when, role="assistant", name=name,
        tool_call_id=call_id, tool_input=args, metadata={**meta, **described},
    )  # fmt: skip
    outputs = [
        part["functionResponse"].get("response", {}).get("output")
        for part in call.get("result") or []
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)
    ]
    text = "\n".join(o if isinstance(o, str) else json.dumps(o) for o in outputs if o is not None)
    display = call.get("resultDisplay")
    yield events.event(
        Kind.TOOL_RESULT, text or _text(display), key=f"{call_id}:result",
        record_type="gemini/toolCall", created_at=when, role="tool", name=name,
        tool_call_id=call_id,
        metadata={"status": call.get("status"), "result": call.get("result"),
                  "result_display": display},
    )  # fmt: skip


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
