"""OpenAI-style chat importer: chat-completions message lists in four file shapes.

Accepted shapes: ``{"messages": [...]}`` (one conversation); a bare JSON array of messages (one
conversation, streamed); a JSON array of ``{"messages": [...]}`` objects; JSONL with one message
per line (one conversation) or one ``{"messages": [...]}`` conversation per line.

Mapping (documented choices):

- A file with one conversation has ``session_id`` ``openai:<stem>`` and ``task_id``
  ``openai/<stem>``; with several, each gets ``:<key>`` / ``/<key>`` where the key is the
  conversation's ``id`` when it is a string, else its 1-based position. One conversation is one
  session (``step_index`` 1). ``dedup_key`` is ``m<position>`` of the message (plus ``:call<k>``
  for tool calls), so re-importing the same file adds nothing.
- ``system``/``developer``/``user``/``assistant`` messages become ``conversation`` events with that
  role (an assistant message that only calls tools yields no empty conversation event).
- Each assistant ``tool_calls`` entry (or legacy ``function_call``) becomes a ``tool_call`` event:
  ``tool_call_id``, ``name``, ``tool_input`` = the parsed ``arguments`` (the raw string when it is
  not JSON). A ``tool`` (or legacy ``function``) message becomes a ``tool_result`` event with its
  ``tool_call_id`` and the tool's name (taken from the message or from the matching call).
- ``reasoning_content`` / ``reasoning`` are kept in metadata exactly as given; list-valued
  ``content`` (parts) keeps its text parts in the content and the parts in ``metadata["parts"]``.
- Dates: the conversation's ``created_at``, else the first message's ``created_at`` or
  ``timestamp`` (epoch seconds or ISO-8601); otherwise the conversation is undated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import Sample, iter_array, iter_jsonl, loads
from scrollctx.ingest._turns import Conversation, SessionStamp, parse_date, require
from scrollctx.log import Kind, NewEvent

__all__ = ["read_openai", "sniff_openai"]

_CHAT_ROLES = ("system", "developer", "user", "assistant")
_RESULT_ROLES = ("tool", "function")
_REASONING = ("reasoning_content", "reasoning")


def sniff_openai(sample: Sample) -> bool:
    """A ``messages`` object, or an array / JSONL of messages or of ``messages`` objects."""
    return _is_conversation(sample.first) or (
        sample.shape != "object" and _is_message(sample.first)
    )


def read_openai(path: Path, sample: Sample) -> Iterator[NewEvent]:
    """Yield the events of every conversation in the file."""
    if sample.shape == "object":
        yield from _conversation_events(path, sample.first, None)
        return
    records = iter_array(path) if sample.shape == "array" else iter_jsonl(path)
    if _is_message(sample.first):
        yield from _message_list_events(path, records, None, None)
        return
    for number, record in enumerate(records, start=1):
        yield from _conversation_events(path, record, number)


def _conversation_events(path: Path, record: Any, number: int | None) -> Iterator[NewEvent]:
    where = "the conversation" if number is None else f"conversation {number}"
    messages = require(record, "messages", list, where, path)
    key = None
    if number is not None:
        key = record["id"] if isinstance(record.get("id"), str) else str(number)
    yield from _message_list_events(path, iter(messages), key, record.get("created_at"))


def _message_list_events(
    path: Path, messages: Iterator[Any], key: str | None, created: Any
) -> Iterator[NewEvent]:
    suffix = "" if key is None else f":{key}"
    convo = Conversation(task_id=f"openai/{path.stem}{suffix.replace(':', '/')}", source="openai")
    session_id = f"openai:{path.stem}{suffix}"
    stamp: SessionStamp | None = None
    call_names: dict[str, str] = {}
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            raise FormatError(
                f"{path}: message {position + 1} of {session_id} is not an object", path=str(path)
            )
        if stamp is None:
            stamp = convo.session(
                _when(created)
                or _when(message.get("created_at"))
                or _when(message.get("timestamp"))
            )
        yield from _message_events(path, convo, stamp, session_id, position, message, call_names)


def _message_events(
    path: Path,
    convo: Conversation,
    stamp: SessionStamp,
    session_id: str,
    position: int,
    message: dict[str, Any],
    call_names: dict[str, str],
) -> Iterator[NewEvent]:
    role = str(require(message, "role", str, f"message {position + 1} of {session_id}", path))
    text, meta = _text_and_metadata(message)
    key = f"m{position}"
    if role in _RESULT_ROLES:
        call_id = message.get("tool_call_id")
        name = message.get("name") or call_names.get(str(call_id)) or "tool"
        yield convo.event(
            stamp,
            session_id,
            key,
            role="tool",
            speaker=f"tool {name}",
            text=text,
            name=name,
            metadata=meta,
            kind=Kind.TOOL_RESULT,
            tool_call_id=_opt_str(call_id),
        )
        return
    if role not in _CHAT_ROLES:
        raise FormatError(
            f"{path}: message {position + 1} of {session_id} has role {role!r}; expected one of "
            f"{', '.join(_CHAT_ROLES + _RESULT_ROLES)}",
            path=str(path),
        )
    calls = list(_tool_calls(message))
    if text or not calls:
        yield convo.event(
            stamp,
            session_id,
            key,
            role=role,
            speaker=role,
            text=text,
            name=_opt_str(message.get("name")),
            metadata=meta,
        )
    for number, (call_id, name, arguments) in enumerate(calls):
        if call_id:
            call_names[call_id] = name
        yield convo.event(
            stamp,
            session_id,
            f"{key}:call{number}",
            role="assistant",
            speaker="assistant",
            text=f"called {name}({arguments if isinstance(arguments, str) else _dumps(arguments)})",
            name=name,
            kind=Kind.TOOL_CALL,
            tool_call_id=call_id,
            tool_input=_parse_arguments(arguments),
            metadata={} if text else meta,
        )


def _text_and_metadata(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    meta: dict[str, Any] = {key: message[key] for key in _REASONING if key in message}
    content = message.get("content")
    if isinstance(content, list):
        meta["parts"] = content
        text = "\n".join(_part_text(part) for part in content)
    elif content is None:
        text = ""
    else:
        text = content if isinstance(content, str) else _dumps(content)
    return text, meta


def _part_text(part: Any) -> str:
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return str(part["text"])
        return f"[{part.get('type', 'part')}]"
    return str(part)


def _tool_calls(message: dict[str, Any]) -> Iterable[tuple[str | None, str, Any]]:
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            yield (
                _opt_str(call.get("id")),
                str(function.get("name") or "tool"),
                function.get("arguments"),
            )
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        yield None, str(legacy.get("name") or "tool"), legacy.get("arguments")


def _parse_arguments(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _when(value: Any) -> datetime | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    if isinstance(value, str):
        return parse_date(value.rstrip("Z").split(".")[0])
    return None


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _is_conversation(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("messages"), list)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
