"""Per-event checksums: how a row proves it is the row that was written.

Every event row carries ``checksum``, written in the same transaction as the row itself: the
first 128 bits (32 hex digits) of the SHA-256 of the row's :data:`CHECKSUM_COLUMNS` in that
order, each encoded with a type tag and a length prefix (text as UTF-8, JSON columns as
canonical JSON: sorted keys, no spaces). A backend computes it with :func:`event_checksum` over
the values it stores and checks it with :func:`verify_event` on every full-row read, so a
flipped byte anywhere in those columns (including ``payload_sha256``, the payload's own digest)
is an :class:`IntegrityError` naming the seq, never a silently served row.

The contract every backend follows (SQLite here, PostgreSQL later):

- Values are the row's logical values: text as ``str``, integers as ``int`` (``searchable`` as
  0/1; a ``bool`` counts as its integer), ``NULL`` as ``None``, and the JSON columns
  (``metadata``, ``tool_input``) as their *parsed* value, hashed with sorted keys. A backend may
  therefore store JSON as text or as ``jsonb``: key order and whitespace do not change the sum.
- ``seq`` is part of the sum, so a row that moved to another seq fails too.
- ``prose`` and ``code`` are not: they are the search index's copy of ``content`` (fenced code
  split out), never served as the row.

It is a guard against damage (a bad disk, a torn copy, a byte flipped by hand), not against an
attacker who can write the file: such a one can recompute the sum. The model's code cannot write
the file at all (see the kernel's sandbox).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from scrollctx.errors import IntegrityError

__all__ = [
    "CHECKSUM_COLUMNS",
    "JSON_COLUMNS",
    "event_checksum",
    "fetch_rows",
    "is_undecodable",
    "stored_checksum",
    "tolerant_text",
    "verify_event",
]

CHECKSUM_COLUMNS = (
    "seq", "session_id", "agent_id", "run_id", "task_id", "step_index", "msg_index", "kind",
    "role", "name", "content", "headline", "label", "tool_call_id", "tool_input", "tool_state",
    "metadata", "created_at", "dedup_key", "payload_sha256", "payload_size", "searchable",
)  # fmt: skip
"""The columns an event's checksum covers, in the order they are hashed."""

JSON_COLUMNS = frozenset({"metadata", "tool_input"})
"""Columns hashed as their parsed JSON value (a backend may store them as text or jsonb)."""


def event_checksum(values: Mapping[str, Any]) -> str:
    """Return the checksum of one event from its logical column values (see the module doc)."""
    return _checksum(values, json_as_text=False)


def stored_checksum(row: Mapping[str, Any]) -> str:
    """Return the checksum of a row as stored, its JSON columns still text."""
    return _checksum(row, json_as_text=True)


def _checksum(values: Mapping[str, Any], *, json_as_text: bool) -> str:
    digest = hashlib.sha256()
    for name in CHECKSUM_COLUMNS:
        value = values[name]
        if name in JSON_COLUMNS and value is not None:
            if json_as_text:
                value = _parse(value)
            digest.update(_field(b"j", _CANONICAL_JSON.encode(value).encode("ascii")))
        elif value is None:
            digest.update(b"n;")
        elif type(value) is str:
            digest.update(_field(b"s", value.encode("utf-8", "surrogatepass")))
        elif type(value) is int or type(value) is bool:
            digest.update(b"i%d;" % value)
        else:  # a type no healthy row holds (a BLOB where text was written)
            digest.update(_field(b"x", repr(value).encode("ascii", "backslashreplace")))
    return digest.hexdigest()[:32]


def verify_event(row: Mapping[str, Any], *, path: object) -> None:
    """Raise :class:`IntegrityError` unless ``row["checksum"]`` matches the row as stored.

    ``row`` holds the checksum columns (JSON columns as stored text) plus ``checksum``;
    ``path`` is the store file, named in the error.
    """
    stored = row["checksum"]
    if stored is not None and stored_checksum(row) == stored:
        return
    seq = row["seq"]
    what = "has no checksum" if stored is None else "does not match its checksum"
    raise IntegrityError(
        f"seq {seq} in {path} {what}: the row was damaged after it was written, so it is not "
        "served. Run `scroll doctor` to list every damaged row; restore the store from a copy "
        "or re-import its sources",
        path=str(path),
        seq=seq,
    )


def _parse(text: Any) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return _Unparsable(text)  # stored JSON is always valid: this is damage


class _Unparsable:
    """A JSON column whose text no longer parses; hashes to something no valid row gives."""

    __slots__ = ("text",)

    def __init__(self, text: object) -> None:
        self.text = text


def _field(tag: bytes, data: bytes) -> bytes:
    # Length-prefixed, so no two different rows encode alike.
    return b"%s%d:%s" % (tag, len(data), data)


def _opaque(value: object) -> object:
    # JSON text that no longer parses: encode it so it can never hash like a valid value.
    if isinstance(value, _Unparsable):
        return {"\x00unparsable": repr(value.text)}
    raise TypeError(f"not JSON: {value!r}")


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_opaque)


# -- reading damaged text from SQLite -----------------------------------------------------------


def is_undecodable(exc: BaseException) -> bool:
    """Whether ``exc`` is sqlite3 failing to decode a TEXT value as UTF-8 (a damaged row).

    The sqlite3 module raises that ``OperationalError`` itself, so unlike every error SQLite
    reports it carries no ``sqlite_errorcode``.
    """
    return (
        isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) is None
    )


@contextmanager
def tolerant_text(conn: sqlite3.Connection) -> Iterator[None]:
    """Within the block, decode TEXT that is not valid UTF-8 with ``surrogateescape``.

    Only for re-reading rows after :func:`is_undecodable`: the escaped text can never match its
    checksum, so :func:`verify_event` then names the damaged seq instead of a decode error.
    """
    previous = conn.text_factory
    conn.text_factory = _decode_tolerantly
    try:
        yield
    finally:
        conn.text_factory = previous


def fetch_rows(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    """Return every row of ``sql`` as a dict, re-reading tolerantly if a TEXT value is damaged."""
    try:
        return _fetch_dicts(conn, sql, params)
    except sqlite3.OperationalError as exc:
        if not is_undecodable(exc):
            raise
    with tolerant_text(conn):
        return _fetch_dicts(conn, sql, params)


def _fetch_dicts(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor]


def _decode_tolerantly(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")
