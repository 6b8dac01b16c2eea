"""A cell's first ``ms`` call, answered ahead: read off the cell's text, run while it starts.

Most cells the model writes open with a literal call, ``hits = ms.search("adoption", k=10)``.
The host reads that call off the cell's source (:func:`first_ms_call`) just before it sends
the cell, and asks the memory reader to run it at once; the reader's answer then waits for the
request the worker sends when the cell reaches the call. The search runs while the worker is
still receiving, parsing and compiling the cell, on the other CPU.

The answer is used only if it is exactly what the call would get now (:class:`AheadCall`):

- the request is the same, byte for byte in its canonical form (:func:`call_key`), built by the
  same :class:`~scrollctx.surface.RemoteSurface` binding the worker's ``ms`` uses (defaults,
  argument checks and wire form are the worker's own);
- it is the first call of that cell over the channel (a later or earlier one never matches);
- no other connection has committed to the store since the answer was begun (SQLite's
  ``data_version``: a tool the cell called first, another agent, ``scroll ingest``);
- it ran to the end: an answer its time ran out on, or that failed, is thrown away.

Otherwise the call runs as it always does. A guess that is never asked for (a cell that fails
before the call) costs the reader at most ``ReaderLimits.ahead_seconds`` (0.05 s; 0 turns
answering ahead off) of SQLite's time: past them, an answer goes on only if its request has
arrived, and then as that call, with the call's whole time budget from then; otherwise every
statement left in it ends at once. (Time a call spends outside SQLite, encoding its answer or
loading the embedding model for its first semantic search, is not cut.)

What is read: ``search``, ``sessions`` and ``index`` (:data:`_READ_AHEAD`: not ``sql_query``,
whose SQL may read the clock or ``random()``, nor the calls that read payloads back), with
literal arguments only (``ast.literal_eval``), in the cell's opening simple statements (at
most 64), outside lambdas and comprehensions (but for a comprehension's first iterable, which
runs at once); the first use of ``ms`` decides (a property read, another call, or one with
computed arguments first means nothing is read), and reading stops at a statement that rebinds
``ms`` or opens a block. Cells longer than :data:`MAX_SOURCE` are not read at all (the host
parses nothing larger). A guess that goes unused leaves no trace: what the surface keeps from
call to call (the search's cached term counts) is put back as it was before it ran.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from scrollctx.surface import Budgets, RemoteSurface
from scrollctx.surface._filters import Binding
from scrollctx.surface._remote import REMOTE_METHODS, Answer

__all__ = ["MAX_SOURCE", "AheadCall", "call_key", "first_ms_call"]

MAX_SOURCE = 4096
"""Cells longer than this (in characters) are not read for a call to answer ahead."""

_READ_AHEAD = frozenset({"search", "sessions", "index"})
"""The calls read ahead: their answer depends on the store alone, and their time is SQLite's,
which a guess nobody asks for gives up. Not ``sql_query`` (SQL may read the clock or
``random()``: an answer ahead would be the earlier one), nor the calls that read payloads back
(``expand``, ``session``, ``recall_tool``: reading and checking a large one is time a guess
could not give up), nor ``close``, nor a property."""
_MAX_STATEMENTS = 64
_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Pass)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_LINE_ENDS = re.compile(r"\r\n|\r|\n")  # Python's own: str.splitlines splits on more


def first_ms_call(source: str) -> dict[str, Any] | None:
    """The request (``{"method", "kwargs"}``) of the first ``ms`` call ``source`` will make,
    if its text says exactly what it is; None if it does not (or the cell cannot be read)."""
    if len(source) > MAX_SOURCE or "ms." not in source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = _LINE_ENDS.split(source)
    for statement in tree.body[:_MAX_STATEMENTS]:
        if not isinstance(statement, _SIMPLE):
            return None  # a block: which call runs first is not in the text
        if "ms" not in "".join(lines[statement.lineno - 1 : statement.end_lineno]):
            continue  # names nothing called ms (the common case: no walk)
        uses = _ms_uses(statement)
        if uses:  # the first use of ms decides: a call read ahead, or nothing
            _, call = min(uses, key=lambda use: (use[0].lineno, use[0].col_offset))
            return _request(call) if call is not None else None
        if any(_rebinds_ms(node) for node in ast.walk(statement)):
            return None
    return None


def call_key(message: Mapping[str, Any]) -> str:
    """The canonical form of a request's call (method and arguments, not its number): two
    requests are the same call if and only if their keys are equal (``1``, ``1.0`` and
    ``true`` stay apart, as they would not under ``==``)."""
    return json.dumps([message.get("method"), message.get("kwargs")], sort_keys=True)


@dataclass(slots=True)
class AheadCall:
    """A call the reader answered ahead, for the first request of one cell."""

    cell: int
    """The request id of the cell whose first call it is (the worker's frames carry it)."""
    key: str
    """:func:`call_key` of the request it answers."""
    version: int
    """The store's ``data_version`` when it began."""
    remembered: Any
    """What the surface kept from call to call before it ran (put back if it goes unused)."""
    answer: Answer | None = None
    extended: bool = False
    """Whether its request arrived while it ran, so that it went on as that call."""

    def answer_for(self, cell: int, message: Mapping[str, Any], version: int) -> Answer | None:
        """This answer, if it is the one the call ``message`` of ``cell`` would get now."""
        if cell == self.cell and version == self.version and call_key(message) == self.key:
            return self.answer
        return None


def _ms_uses(statement: ast.stmt) -> list[tuple[ast.Attribute, ast.Call | None]]:
    # What reaches the reader when the statement runs: each ms member it names (a call, a
    # property, anything the worker's ms sends on), with the call when it is one read ahead;
    # not in a lambda, nor in a comprehension past its first iterable, which may never run.
    found: list[tuple[ast.Attribute, ast.Call | None]] = []
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, _COMPREHENSIONS):
            pending.append(node.generators[0].iter)  # evaluated at once; the rest may never be
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call) and _is_ms(node.func) and node.func.attr in _READ_AHEAD:
            found.append((node.func, node))
            pending.extend([*node.args, *(keyword.value for keyword in node.keywords)])
            continue
        if _is_ms(node) and node.attr in REMOTE_METHODS:
            found.append((node, None))
        pending.extend(ast.iter_child_nodes(node))
    return found


def _is_ms(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id == "ms")
    )


def _rebinds_ms(node: ast.AST) -> bool:
    # An assignment, a walrus or a del: from here, ms may not be the kernel's.
    return isinstance(node, ast.Name) and node.id == "ms" and not isinstance(node.ctx, ast.Load)


def _request(call: ast.Call) -> dict[str, Any] | None:
    try:
        args = [_literal(arg) for arg in call.args]
        kwargs = {kw.arg: _literal(kw.value) for kw in call.keywords if kw.arg is not None}
    except ValueError:
        return None
    if len(kwargs) != len(call.keywords):
        return None  # **mapping: not literal
    method = call.func.attr  # type: ignore[attr-defined]  # _ms_uses checked it
    try:
        getattr(_CAPTURE, method)(*args, **kwargs)
    except _Captured as captured:
        return captured.request
    except Exception:  # noqa: BLE001 - wrong arguments: the cell gets that error itself
        return None
    return None


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Starred):
        raise ValueError("a starred argument is not literal")
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError("not a literal") from exc


class _Captured(Exception):  # noqa: N818 - not an error: how the request is taken
    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__()
        self.request = request


def _capture(request: dict[str, Any]) -> dict[str, Any]:
    raise _Captured(request)


_CAPTURE = RemoteSurface(_capture, Binding(None, None, None), Budgets())
"""An ``ms`` whose transport keeps the request instead of sending it: the worker's binding."""
