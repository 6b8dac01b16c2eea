"""The stored form of an event, computed once for every backend.

Both Event Log backends (SQLite, PostgreSQL) call :func:`new_row` for an append and
:func:`stored_row` when they receive an event that already has its seq (a copy between stores,
a replica): one definition of what a row holds, so a copied or replicated row is the same row.
A payload above the threshold is written to the store's payloads *before* the row is built, so
a committed row never references bytes that are not durable. The backend adds ``seq`` and the
row's checksum (``_integrity``) over exactly these values once it has numbered the row.
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any

from scrollctx.errors import UsageError
from scrollctx.log._events import Event, NewEvent, utc_now_iso
from scrollctx.log._payloads import Payloads, preview_of
from scrollctx.log._text import extractive_label

__all__ = ["COLUMNS", "dumps", "new_row", "storable_text", "stored_row"]

COLUMNS = (
    "session_id", "agent_id", "run_id", "task_id", "step_index", "msg_index", "kind", "role",
    "name", "content", "headline", "label", "tool_call_id", "tool_input", "tool_state",
    "metadata", "created_at", "dedup_key", "payload_sha256", "payload_size", "searchable",
)  # fmt: skip
"""The columns of a row both backends store, ``seq`` aside (SQLite adds its search text)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_FIELDS = ("session_id", "agent_id", "run_id", "task_id", "kind", "role", "name",
                "headline", "tool_call_id", "tool_state", "created_at", "dedup_key")  # fmt: skip


def new_row(event: NewEvent, payloads: Payloads, threshold: int) -> dict[str, Any]:
    """Validate ``event`` and return its row (externalizing content above ``threshold`` bytes)."""
    if not event.session_id:
        raise UsageError("an event needs a non-empty session_id")
    if not event.kind:
        raise UsageError("an event needs a non-empty kind")
    _check_types(event)
    content = storable_text(event.content or "")
    data = content.encode("utf-8")
    sha256: str | None = None
    size: int | None = None
    if len(data) > threshold:
        sha256, size = payloads.put(data), len(data)
        content = preview_of(content, size)
    text = {name: storable_text(getattr(event, name)) for name in _TEXT_FIELDS}
    return {
        "session_id": text["session_id"],
        "agent_id": text["agent_id"],
        "run_id": text["run_id"],
        "task_id": text["task_id"],
        "step_index": _integer(event.step_index, "step_index"),
        "msg_index": _integer(event.msg_index, "msg_index"),
        "kind": text["kind"],
        "role": text["role"],
        "name": text["name"],
        "content": content,
        "headline": text["headline"],
        "label": None if event.headline else extractive_label(content),
        "tool_call_id": text["tool_call_id"],
        "tool_input": None if event.tool_input is None else _storable_json(event.tool_input),
        "tool_state": text["tool_state"],
        "metadata": _storable_json(event.metadata or {}),
        "created_at": text["created_at"] or utc_now_iso(),
        "dedup_key": text["dedup_key"],
        "payload_sha256": sha256,
        "payload_size": size,
        "searchable": event.searchable,
    }


def stored_row(event: Event) -> dict[str, Any]:
    """Return the row of an event that already has its seq, exactly as its source stored it."""
    row = {name: getattr(event, name) for name in COLUMNS}
    row["tool_input"] = None if event.tool_input is None else dumps(event.tool_input)
    row["metadata"] = dumps(event.metadata or {})
    return row


def _check_types(event: NewEvent) -> None:
    # A database may store a number given for a text column as text (SQLite does, and a digit
    # string given for an integer column as an integer): the row read back would then differ
    # from what was hashed, and fail its own checksum. Refuse such values instead.
    for name in _TEXT_FIELDS:
        value = getattr(event, name)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"event field {name} must be text or None; got {value!r}")


def storable_text(text: str | None, *, backslash: str = "\\") -> Any:
    """``text`` with each lone surrogate written out as its escape: ``\\udcff``, six characters.

    A lone surrogate is not Unicode, so no UTF-8 store can hold it (the append would fail); it
    reaches an event from a file name the OS could not decode (``os.fsdecode``) or from a JSON
    ``"\\ud800"`` escape in an imported file or a model's reply. Valid text is left as it is.
    In JSON text (``backslash="\\\\"``) the escape's backslash is itself escaped, so the value
    read back is those six characters too.
    """
    if text is None or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda found: f"{backslash}u{ord(found.group()):04x}", text)
    return text


def _storable_json(value: Any) -> str:
    return str(storable_text(dumps(value), backslash="\\\\"))


def stored_size(value: Any) -> int:
    """The bytes ``value`` takes in the Event Log: text as an event's field stores it, anything
    else as its JSON (``tool_input``, ``metadata``). What a bound on logged bytes counts."""
    text = storable_text(value) if isinstance(value, str) else _storable_json(value)
    return len(text.encode("utf-8"))


def _integer(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        return operator.index(value)
    except TypeError as exc:
        raise UsageError(f"event field {name} must be an integer or None; got {value!r}") from exc


def dumps(value: Any) -> str:
    """Serialize JSON the way the log stores it (compact, UTF-8 kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
