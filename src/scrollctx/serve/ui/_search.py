"""The search page: ``ms.search`` itself (its query language, filters and snippets).

Each search opens the memory surface read-only for that request (the surface's connection
stays in its thread) and closes it after; hits keep the surface's «match» markers for the
template to highlight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.surface import open_surface

__all__ = ["SearchForm", "SearchResult", "run_search"]

_MAX_K = 100


@dataclass(frozen=True, slots=True)
class SearchForm:
    """What the search form asked for."""

    query: str
    k: int = 20
    kind: str = ""
    role: str = ""
    session_id: str = ""
    created_from: str = ""
    created_to: str = ""

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> SearchForm:
        """Read the form from URL parameters (blank fields are no filter)."""
        raw_k = params.get("k", "20")
        k = int(raw_k) if raw_k.isascii() and raw_k.isdigit() else 20
        return cls(
            query=params.get("q", "").strip(),
            k=max(1, min(k, _MAX_K)),
            kind=params.get("kind", "").strip(),
            role=params.get("role", "").strip(),
            session_id=params.get("session", "").strip(),
            created_from=params.get("from", "").strip(),
            created_to=params.get("to", "").strip(),
        )


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits and the notes ``ms.search`` returned."""

    hits: list[dict[str, Any]]
    notes: list[str]
    partial: bool


def run_search(db_path: Path, form: SearchForm) -> SearchResult:
    """Run the form's query through ``ms.search``.

    Raises:
        QueryError: the query or a filter cannot run (shown on the page).
    """
    with open_surface(db_path) as ms:
        rows = ms.search(
            form.query,
            form.k,
            kind=form.kind or None,
            role=form.role or None,
            session_id=form.session_id or None,
            created_from=form.created_from or None,
            created_to=form.created_to or None,
        )
        return SearchResult(list(rows), list(rows.notes), bool(rows.partial))
