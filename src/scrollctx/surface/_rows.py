"""What ``ms`` calls return: plain dict rows in a list that carries notes and budget flags.

Invariant: a result cut short by a budget says so (``partial=True`` plus a note naming the budget
and how to narrow); a row-capped SQL result also sets ``truncated=True``. Nothing is cut
silently.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scrollctx.errors import UsageError

__all__ = ["Budgets", "ResultRows", "format_notes", "row_bytes", "shorten"]


@dataclass(frozen=True, slots=True)
class Budgets:
    """Per-call limits of the memory surface.

    Example: ``open_surface(path, budgets=Budgets(seconds=2.0, rows=500))``.
    """

    seconds: float = 5.0
    """Wall time one call may spend inside SQLite."""
    rows: int = 1000
    """Rows one call may return (``sql_query`` caps here and sets ``truncated``)."""
    bytes: int = 4 * 1024 * 1024
    """Text one call may return, counted in UTF-8 bytes of its values."""

    def __post_init__(self) -> None:
        if not self.seconds > 0 or self.rows < 1 or self.bytes < 1:
            raise UsageError(
                f"budgets must be positive, got seconds={self.seconds}, rows={self.rows}, "
                f"bytes={self.bytes}"
            )


class ResultRows(list[dict[str, Any]]):
    """A list of row dicts plus ``notes`` (lines for the model), ``partial`` and ``truncated``."""

    def __init__(
        self,
        rows: Iterable[dict[str, Any]] = (),
        *,
        notes: Iterable[str] = (),
        partial: bool = False,
        truncated: bool = False,
    ) -> None:
        super().__init__(rows)
        self.notes: list[str] = list(notes)
        self.partial = partial
        self.truncated = truncated

    def note(self, text: str, *, partial: bool = False) -> None:
        """Attach a note; ``partial=True`` also marks the result as cut short."""
        self.notes.append(text)
        self.partial = self.partial or partial


def format_notes(notes: Iterable[str]) -> str:
    """Render notes the way a cell observation shows them: one ``[note] …`` line each."""
    return "\n".join(f"[note] {note}" for note in notes)


def row_bytes(row: dict[str, Any]) -> int:
    """Approximate the UTF-8 size of a row's values (what a byte budget counts)."""
    total = 0
    for value in row.values():
        if isinstance(value, str):
            total += len(value.encode("utf-8", "replace"))
        elif isinstance(value, bytes):
            total += len(value)
        elif isinstance(value, dict | list):
            total += len(json.dumps(value, default=str))
        else:
            total += 8
    return total


def shorten(text: str, chars: int | None, seq: int) -> str:
    """Cut ``text`` to ``chars`` characters, saying how much is hidden and how to get it."""
    if chars is None or len(text) <= chars:
        return text
    hidden = len(text) - chars
    return f"{text[:chars]}… [+{hidden} chars hidden; ms.expand([{seq}]) for the full turn]"


def load_json(text: str | None) -> Any:
    """Parse a JSON column, keeping unparsable text as-is rather than failing the call."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def as_dict(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> dict[str, Any]:
    """Zip a fetched tuple with its cursor's column names."""
    return {col[0]: value for col, value in zip(cursor.description, values, strict=False)}
