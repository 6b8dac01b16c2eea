"""BEAM importer: ``chats/<tier>/<n>/chat.json``, a JSON array of batches of turn groups.

Mapping (documented choices):

- One batch is one session. ``session_id`` is ``beam:<tier>/<n>:b<batch_number>``, ``task_id``
  ``beam/<tier>/<n>``, ``dedup_key`` ``beam:<tier>/<n>:m<id>`` (the message ``id`` is unique in a
  chat); ``step_index`` counts batches chronologically from 1 across the whole chat.
- The session date is the ``time_anchor`` of the batch's first user message that has one
  (``March-15-2024``); a batch without one inherits the previous batch's date.
- User contents lose their trailing generator marker (``->-> 1,1``, from the last ``->->`` on
  the final line to the end); the stripped text is kept exactly in ``metadata["marker"]``.
  Assistant contents are kept as written.
- Metadata: ``id``, ``batch_number``, and on user messages ``index``, ``question_type``,
  ``time_anchor`` when present.
- BEAM-10M nests one level deeper: the array holds plans (``{"plan-N": [batch, ...]}`` objects,
  or one object mapping ``plan-N`` to batch lists) whose message ids continue across plans.
  Plans are read in numeric order; a batch's ``session_id`` becomes ``...:p<N>b<batch_number>``
  and its metadata gains ``plan``.
- ``tier`` and ``n`` come from the two folder names above ``chat.json`` (for another file name:
  the parent folder and the file stem).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import Sample, iter_array, load_whole
from scrollctx.ingest._turns import Conversation, natural_key, parse_date, require
from scrollctx.log import NewEvent

__all__ = ["beam_chat_id", "read_beam", "sniff_beam"]

_PLAN_KEY = re.compile(r"plan-(\d+)")
_MARKER = re.compile(r"\s*->->[^\n]*\Z")
_USER_FIELDS = ("index", "question_type", "time_anchor")


def sniff_beam(sample: Sample) -> bool:
    """An array of batches (``batch_number`` + ``turns``), or of/with ``plan-N`` entries."""
    first = sample.first
    if sample.shape == "array":
        return _is_batch(first) or _is_plan_map(first)
    return sample.shape == "object" and _is_plan_map(first)


def beam_chat_id(path: Path) -> str:
    """Return ``<tier>/<n>`` for a chat file (``chats/500K/3/chat.json`` -> ``500K/3``)."""
    if path.name == "chat.json":
        return f"{path.parent.parent.name}/{path.parent.name}"
    return f"{path.parent.name}/{path.stem}"


def read_beam(path: Path, sample: Sample) -> Iterator[NewEvent]:
    """Yield one event per message of the chat, batches in order."""
    chat_id = beam_chat_id(path)
    convo = Conversation(task_id=f"beam/{chat_id}", source="beam")
    records = iter_array(path) if sample.shape == "array" else iter([load_whole(path)])
    for record in records:
        if _is_batch(record):
            yield from _batch_events(path, convo, chat_id, record, plan=None)
        elif _is_plan_map(record):
            for plan, batches in _plans(record):
                for batch in batches:
                    yield from _batch_events(path, convo, chat_id, batch, plan=plan)
        else:
            raise FormatError(
                f"{path}: expected a BEAM batch (batch_number, turns) or a plan-N object, found "
                f"{_describe(record)}",
                path=str(path),
            )


def _batch_events(
    path: Path, convo: Conversation, chat_id: str, batch: Any, *, plan: int | None
) -> Iterator[NewEvent]:
    number = require(batch, "batch_number", int, "a batch", path)
    groups = require(batch, "turns", list, f"batch {number}", path)
    messages = [m for group in groups for m in _group(group, path, number)]
    stamp = convo.session(_anchor(batch, messages))
    session_id = f"beam:{chat_id}:{'b' if plan is None else f'p{plan}b'}{number}"
    for message in messages:
        where = f"batch {number} message"
        role = str(require(message, "role", str, where, path))
        msg_id = require(message, "id", int, where, path)
        text = str(require(message, "content", str, f"message {msg_id}", path))
        meta: dict[str, Any] = {"id": msg_id, "batch_number": number}
        if plan is not None:
            meta["plan"] = plan
        meta.update({key: message[key] for key in _USER_FIELDS if key in message})
        if role == "user":
            text, marker = _strip_marker(text)
            if marker:
                meta["marker"] = marker
        yield convo.event(
            stamp,
            session_id,
            f"beam:{chat_id}:m{msg_id}",
            role=role,
            speaker=role,
            text=text,
            metadata=meta,
        )


def _group(group: Any, path: Path, number: int) -> list[Any]:
    # A turn group is a list of messages; tolerate a bare message object in its place.
    if isinstance(group, dict):
        return [group]
    if not isinstance(group, list):
        raise FormatError(
            f"{path}: batch {number} has a turn group that is {_describe(group)}, not a list",
            path=str(path),
        )
    return group


def _anchor(batch: dict[str, Any], messages: list[Any]) -> datetime | None:
    candidates = [batch.get("time_anchor")] + [
        m.get("time_anchor") for m in messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    for raw in candidates:
        if isinstance(raw, str) and (when := parse_date(raw)) is not None:
            return when
    return None


def _strip_marker(text: str) -> tuple[str, str]:
    match = _MARKER.search(text)
    if match is None:
        return text, ""
    return text[: match.start()], match.group(0).strip()


def _is_batch(record: Any) -> bool:
    return isinstance(record, dict) and "turns" in record and "batch_number" in record


def _is_plan_map(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and bool(record)
        and all(_PLAN_KEY.fullmatch(str(key)) for key in record)
        and all(isinstance(value, list) for value in record.values())
    )


def _plans(record: dict[str, Any]) -> list[tuple[int, list[Any]]]:
    keys = sorted(record, key=natural_key)
    return [(int(key.split("-", 1)[1]), record[key]) for key in keys]


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:5]}"
    return f"a {type(value).__name__}"
