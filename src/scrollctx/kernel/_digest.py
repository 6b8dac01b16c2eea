"""The namespace digest: each user variable's name, type and shape, with small scalars inline.

:func:`summarize_namespace` runs in the worker (it touches the live objects); the host receives
the entries as untrusted JSON, validates them with :func:`parse_digest` and renders them with
:func:`render_digest`. Hidden: names starting with ``_``, modules, and the names the kernel bound
itself (``ms``, the tools...) while they still hold the kernel's object.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrollctx.kernel._frames import is_count

__all__ = [
    "DigestEntry",
    "FIELD_CHARS",
    "MAX_ENTRIES",
    "parse_digest",
    "render_digest",
    "summarize_namespace",
]

MAX_ENTRIES = 60
"""At most this many variables are listed; the rest are counted."""

FIELD_CHARS = 200
"""Each field of an entry (name, type, summary) is cut to this many characters."""

_INLINE = 60
_SCALARS = (bool, int, float, complex, type(None))
_SEQUENCES = (list, tuple, set, frozenset)


@dataclass(frozen=True, slots=True)
class DigestEntry:
    """One variable: ``rows: list[dict] len=120``, ``df: DataFrame shape=(3, 4)``."""

    name: str
    type: str
    summary: str

    def render(self) -> str:
        """Return the entry as one line."""
        return f"{self.name}: {self.type}" + (f" {self.summary}" if self.summary else "")


def render_digest(entries: tuple[DigestEntry, ...] | list[DigestEntry], more: int = 0) -> str:
    """Render the digest as the model sees it, one variable per line."""
    if not entries:
        return "(no variables)"
    lines = [entry.render() for entry in entries]
    if more:
        lines.append(f"… and {more} more")
    return "\n".join(lines)


def parse_digest(raw: Any) -> tuple[tuple[DigestEntry, ...], int]:
    """Validate the worker's digest (untrusted); return the entries and the hidden count."""
    if not isinstance(raw, Mapping):
        return (), 0
    items = raw.get("entries")
    more = raw.get("more")
    entries = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        fields = [item.get(key) for key in ("name", "type", "summary")]
        if all(isinstance(value, str) for value in fields):
            name, type_name, summary = (str(value)[:FIELD_CHARS] for value in fields)
            entries.append(DigestEntry(name, type_name, summary))
        if len(entries) >= MAX_ENTRIES:
            break
    return tuple(entries), more if is_count(more) else 0


def summarize_namespace(
    namespace: Mapping[str, Any], prebound: Mapping[str, Any]
) -> dict[str, Any]:
    """Describe the user's variables (runs in the worker, on live objects)."""
    names = [
        name
        for name, value in namespace.items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and not (name in prebound and prebound[name] is value)
    ]
    entries = [describe(name, namespace[name]) for name in names[:MAX_ENTRIES]]
    return {"entries": entries, "more": max(0, len(names) - MAX_ENTRIES)}


def describe(name: str, value: Any) -> dict[str, str]:
    """Describe one value as ``{"name", "type", "summary"}``; never raises."""
    try:
        type_name, summary = _summary(value)
    except Exception as exc:  # noqa: BLE001 - user objects may raise anything from len/repr
        type_name, summary = type(value).__name__, f"(not described: {type(exc).__name__})"
    return {
        "name": name[:FIELD_CHARS],
        "type": type_name[:FIELD_CHARS],
        "summary": summary[:FIELD_CHARS],
    }


def _summary(value: Any) -> tuple[str, str]:
    kind = type(value).__name__
    if isinstance(value, _SCALARS):
        return kind, f"= {_short(repr(value))}"
    if isinstance(value, str | bytes):
        if len(value) <= _INLINE:
            return kind, f"= {value!r}"
        return kind, f"len={len(value):,}"
    if isinstance(value, type):
        return "class", value.__qualname__
    if callable(value) and isinstance(value, types.FunctionType | types.BuiltinFunctionType):
        return kind, _signature(value)
    shape = getattr(value, "shape", None) if not isinstance(value, Mapping) else None
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return kind, _shaped(value, shape)
    if isinstance(value, Mapping):
        return kind, _mapping(value)
    if isinstance(value, _SEQUENCES):
        return _sequence_type(value), f"len={len(value):,}"
    return kind, f"= {_short(repr(value))}"


def _short(text: str) -> str:
    return text if len(text) <= _INLINE else text[: _INLINE - 1] + "…"


def _signature(func: Any) -> str:
    try:
        return f"{func.__name__}{inspect.signature(func)}"
    except (TypeError, ValueError):
        return f"{func.__name__}(…)"


def _shaped(value: Any, shape: tuple[int, ...]) -> str:
    text = f"shape={shape}"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and not callable(dtype):
        text += f" dtype={_short(str(dtype))}"
    columns = getattr(value, "columns", None)
    if columns is not None and not callable(columns):
        names = [str(c) for c in list(columns)[:6]]
        text += " columns=[" + ", ".join(names) + (", …]" if len(columns) > 6 else "]")
    return text


def _mapping(value: Mapping[Any, Any]) -> str:
    keys = [_short(repr(key)) for key in list(value.keys())[:6]]
    more = ", …" if len(value) > 6 else ""
    return f"len={len(value):,} keys=[{', '.join(keys)}{more}]"


def _sequence_type(value: Any) -> str:
    kind = type(value).__name__
    if not value:
        return kind
    first = next(iter(value))
    return f"{kind}[{type(first).__name__}]"
