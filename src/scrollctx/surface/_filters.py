"""Turn ``ms.search`` keyword filters into one parameterised SQL condition over ``c`` rows.

Every value is bound as a parameter; only fixed column names appear in the SQL text. Bad filter
values raise :class:`QueryError` naming the argument and an example of a good value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scrollctx.errors import QueryError

__all__ = ["Binding", "Filters", "build_filters", "clamp_int64"]

_SCOPES = ("session", "task", "all")
_INT64 = (-(2**63), 2**63 - 1)
_ISO_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, slots=True)
class Binding:
    """Who is asking: the session, task and agent the surface is bound to (each may be None)."""

    session_id: str | None = None
    task_id: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class Filters:
    """A SQL condition (``"1"`` when unfiltered) and its parameters."""

    sql: str
    params: tuple[Any, ...]


def build_filters(
    binding: Binding,
    *,
    kind: object = None,
    role: object = None,
    scope: object = "all",
    all_agents: bool = False,
    session_id: object = None,
    seq_range: object = None,
    step_range: object = None,
    created_from: object = None,
    created_to: object = None,
) -> Filters:
    """Build the condition for the search filters (see ``MemorySurface.search``)."""
    parts: list[str] = []
    params: list[Any] = []
    _scope(binding, scope, parts, params)
    if not all_agents and binding.agent_id is not None:
        # Imported history has no agent; it is shared by every agent of the store.
        parts.append("(c.agent_id = ? OR c.agent_id IS NULL)")
        params.append(binding.agent_id)
    if session_id is not None:
        parts.append("c.session_id = ?")
        params.append(str(session_id))
    _one_of("kind", kind, parts, params)
    _one_of("role", role, parts, params)
    _range("seq", seq_range, parts, params)
    _range("step_index", step_range, parts, params)
    if created_from is not None:
        parts.append("c.created_at >= ?")
        params.append(_iso("created_from", created_from))
    if created_to is not None:
        # Prefix comparison makes a bare date inclusive of that whole day.
        bound = _iso("created_to", created_to)
        parts.append("substr(c.created_at, 1, ?) <= ?")
        params += [len(bound), bound]
    return Filters(" AND ".join(parts) or "1", tuple(params))


def _scope(binding: Binding, scope: object, parts: list[str], params: list[Any]) -> None:
    if scope not in _SCOPES:
        raise QueryError(f"scope must be one of 'session', 'task', 'all'; got {scope!r}")
    if scope == "session" and binding.session_id is not None:
        parts.append("c.session_id = ?")
        params.append(binding.session_id)
    elif scope == "task" and binding.task_id is not None:
        parts.append("c.task_id = ?")
        params.append(binding.task_id)


def _one_of(column: str, value: object, parts: list[str], params: list[Any]) -> None:
    if value is None:
        return
    if isinstance(value, str):
        parts.append(f"c.{column} = ?")
        params.append(value)
        return
    if isinstance(value, Sequence | set | frozenset) and all(isinstance(v, str) for v in value):
        values = list(value)
        if not values:
            parts.append("0")
            return
        parts.append(f"c.{column} IN ({','.join('?' * len(values))})")
        params.extend(values)
        return
    raise QueryError(
        f"{column}= takes a string or a list of strings, e.g. {column}='user'; got {value!r}"
    )


def _range(column: str, value: object, parts: list[str], params: list[Any]) -> None:
    if value is None:
        return
    name = "seq_range" if column == "seq" else "step_range"
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise QueryError(
            f"{name} takes (lo, hi), both inclusive, e.g. {name}=(100, 250); got {value!r}"
        )
    for bound, op in zip(value, (">=", "<="), strict=True):
        if bound is None:
            continue
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise QueryError(f"{name} bounds must be integers or None; got {value!r}")
        parts.append(f"c.{column} {op} ?")
        params.append(clamp_int64(bound))


def clamp_int64(value: int) -> int:
    """Clamp a bound to SQLite's integer range (no row lies beyond it; SQLite cannot bind more)."""
    return min(max(value, _INT64[0]), _INT64[1])


def _iso(name: str, value: object) -> str:
    text = value.isoformat() if hasattr(value, "isoformat") else value
    if not isinstance(text, str) or not _ISO_PREFIX.match(text):
        raise QueryError(
            f"{name} takes an ISO date or datetime such as '2024-03-15'; got {value!r}"
        )
    return text
