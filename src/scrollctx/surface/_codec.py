"""A faithful encoding, over JSON, of the Python values an ``ms`` call takes and returns.

JSON carries ``None``, ``bool``, ``int``, ``float`` (NaN and the infinities too, as Python's
``json`` writes them), ``str``, ``list`` and ``str``-keyed ``dict``. Every other value an ``ms``
call may see is *tagged*: a dict with exactly one key, which starts with ``$``::

    {"$tuple": [...]}        {"$set": [...]}          {"$frozenset": [...]}
    {"$bytes": "<base64>"}   {"$bytearray": "<b64>"}  {"$str": "<hex of UTF-8, surrogatepass>"}
    {"$date": "2024-03-15"}  {"$datetime": "<iso>"}   {"$time": "<iso>"}
    {"$dict": [[key, value], ...]}                    a dict with a non-str key, or a "$" key
    {"$opaque": {"type": ..., "repr": ..., "str": ...}}   anything else (see :class:`Opaque`)

Invariants:

- ``from_wire(to_wire(v)) == v``, of the same type, for every value built from the types above
  (subclasses of ``int``, ``float`` and ``str`` arrive as the base type): a tuple stays a tuple
  and ``bytes`` stay ``bytes``, so error messages that show ``repr`` read the same on both sides;
- a plain dict is never mistaken for a tag: :func:`to_wire` writes every dict that has a key
  starting with ``$`` (or a key that is not a ``str``) as ``$dict``;
- :func:`from_wire` never raises on untrusted input: a malformed tag is kept as the plain dict
  it is.
"""

from __future__ import annotations

import base64
import json
from datetime import date, datetime, time
from typing import Any

__all__ = ["Opaque", "dumps", "from_wire", "to_wire"]


class Opaque:
    """Stands in for a value of a type the wire cannot carry: same ``repr``, same ``str``.

    ``ms`` calls only format such values into error messages or ``str()`` them (a query, a
    session id), so the stand-in behaves as the original did there; it is never an instance of
    the types the surface checks for, exactly like the original.
    """

    __slots__ = ("_repr", "_str", "type_name")

    def __init__(self, type_name: str, shown: str, text: str) -> None:
        self.type_name, self._repr, self._str = type_name, shown, text

    def __repr__(self) -> str:
        return self._repr

    def __str__(self) -> str:
        return self._str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (other.type_name, repr(other)) == (
            self.type_name,
            self._repr,
        )

    def __hash__(self) -> int:
        return hash((self.type_name, self._repr))


def to_wire(value: Any) -> Any:
    """Return ``value`` as JSON-able data, tagging what plain JSON would lose."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return _text(str(value))
    if isinstance(value, list):
        return [to_wire(item) for item in value]
    if isinstance(value, dict):
        return _mapping(value)
    if isinstance(value, tuple):
        return {"$tuple": [to_wire(item) for item in value]}
    if isinstance(value, frozenset | set):
        tag = "$frozenset" if isinstance(value, frozenset) else "$set"
        return {tag: [to_wire(item) for item in value]}
    if isinstance(value, bytes | bytearray | memoryview):
        tag = "$bytearray" if isinstance(value, bytearray) else "$bytes"
        return {tag: base64.b64encode(bytes(value)).decode("ascii")}
    for kind, tag in ((datetime, "$datetime"), (date, "$date"), (time, "$time")):
        if isinstance(value, kind):
            return {tag: value.isoformat()}
    return {"$opaque": {"type": type(value).__name__, "repr": _shown(repr, value),
                        "str": _shown(str, value)}}  # fmt: skip


def from_wire(data: Any) -> Any:
    """Rebuild the value :func:`to_wire` encoded (untrusted input: never raises)."""
    if isinstance(data, list):
        return [from_wire(item) for item in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1:
        ((key, inner),) = data.items()
        if key.startswith("$"):
            try:
                return _untag(key, inner)
            except (TypeError, ValueError, KeyError):  # a malformed tag stays the data it is
                return data
    return {key: from_wire(item) for key, item in data.items()}


def dumps(value: Any) -> tuple[str, bool]:
    """Encode ``value`` as JSON text; return it and whether :func:`from_wire` must decode it.

    Values JSON carries as they are (every SQLite row and JSON column is one) take the C
    encoder's path untouched; anything else is tagged with :func:`to_wire`. Tuples would pass
    the plain path as lists, so call arguments, which may hold them, always go through
    :func:`to_wire` instead.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")), False
    except (TypeError, ValueError):
        return json.dumps(to_wire(value), ensure_ascii=False, separators=(",", ":")), True


def _text(text: str) -> Any:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (undecodable file names): keep them exactly
        return {"$str": text.encode("utf-8", "surrogatepass").hex()}
    return text


def _mapping(value: dict[Any, Any]) -> Any:
    if all(isinstance(key, str) and not key.startswith("$") for key in value):
        return {key: to_wire(item) for key, item in value.items()}
    return {"$dict": [[to_wire(key), to_wire(item)] for key, item in value.items()]}


def _shown(render: Any, value: Any) -> str:
    try:
        return str(render(value))
    except Exception as exc:  # noqa: BLE001 - a value whose repr fails still crosses
        return f"<{type(value).__name__} object ({type(exc).__name__} in its repr)>"


def _untag(key: str, inner: Any) -> Any:
    if key in _SEQUENCES and isinstance(inner, list):
        return _SEQUENCES[key](from_wire(item) for item in inner)
    if key == "$dict" and isinstance(inner, list):
        return {_key(from_wire(k)): from_wire(v) for k, v in inner}
    if key == "$opaque" and isinstance(inner, dict):
        return Opaque(str(inner["type"]), str(inner["repr"]), str(inner["str"]))
    if not isinstance(inner, str):
        raise ValueError(key)
    if key in ("$bytes", "$bytearray"):
        raw = base64.b64decode(inner.encode("ascii"), validate=True)
        return bytearray(raw) if key == "$bytearray" else raw
    if key == "$str":
        return bytes.fromhex(inner).decode("utf-8", "surrogatepass")
    if key == "$datetime":
        return datetime.fromisoformat(inner)
    if key == "$date":
        return date.fromisoformat(inner)
    if key == "$time":
        return time.fromisoformat(inner)
    raise KeyError(key)


_SEQUENCES: dict[str, type[tuple[Any, ...]] | type[set[Any]] | type[frozenset[Any]]] = {
    "$tuple": tuple,
    "$set": set,
    "$frozenset": frozenset,
}


def _key(value: Any) -> Any:
    # A key must be hashable; a list can only come from a forged frame.
    hash(value)
    return value
