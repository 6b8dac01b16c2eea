"""``ms`` across a process boundary: the client a kernel binds, and the side that answers it.

:class:`RemoteSurface` has exactly :class:`~scrollctx.surface.MemorySurface`'s public API: its
members are derived from that class when this module is imported, never restated. The binding
properties, ``days_between``, ``drain_notes``, ``help``, ``repr`` and the context manager are the
very functions of ``MemorySurface`` (they read only the binding, the budgets and the notes kept
here); every other public member (``search``, ``expand``, ``sql_query``, ``sessions``,
``session``, ``recall_tool``, ``index``, ``close``, ``has_fts5``) is a generated function with
the original's name, signature, defaults, annotations and docstring, so ``help()``, argument
errors and ``ms.help()`` read as they do in-process. A call binds its arguments exactly as the
original would, then crosses as one message through a *transport* (a function from request to
reply: the kernel worker's frame pipe, or the host's reader process) to :func:`run_call`,
which runs it on a real ``MemorySurface``; :meth:`Answer.reply` writes the reply.

Messages (JSON objects; the caller's framing adds the request id)::

    request  {"method": name, "kwargs": <codec>}                     (the transport adds
                                                                      "op": "ms", "call": n)
    reply    {"op": "ms_result", "call": n, "ok": true, "value": <json>, "tagged": bool,
              "rows": {"notes": [...], "partial": bool, "truncated": bool} | absent,
              "notes": [...]}
             {"op": "ms_result", "call": n, "ok": false, "notes": [...],
              "error": {"module": ..., "type": ..., "args": <codec>, "attrs": <codec>,
                        "cause": <error> | null}}

Invariants:

- results, notes, ``partial``/``truncated`` and errors are the in-process ones: the value is
  encoded faithfully (:mod:`._codec`; BLOBs stay ``bytes``), the notes the call kept come back
  in ``notes`` and collect here until :meth:`drain_notes`, and an error is rebuilt as the same
  class with the same arguments, attributes and cause (classes from ``scrollctx.errors``,
  builtins and ``sqlite3`` only; anything else arrives as ``RuntimeError``);
- :func:`run_call` never raises for what a request holds, and :meth:`Answer.reply` never
  returns more than its ``limit`` of bytes: a larger result becomes a
  :class:`~scrollctx.errors.QueryError` saying so.
"""

from __future__ import annotations

import builtins
import inspect
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import scrollctx.errors as errors
from scrollctx.errors import QueryError
from scrollctx.surface._codec import dumps, from_wire, to_wire
from scrollctx.surface._filters import Binding
from scrollctx.surface._rows import Budgets, ResultRows
from scrollctx.surface._surface import MemorySurface, _seqs_of, _sql_params

__all__ = ["Answer", "RemoteSurface", "Transport", "error_reply", "run_call"]

Transport = Callable[[dict[str, Any]], dict[str, Any]]
"""Sends one request (``{"method", "kwargs"}``) and returns the decoded reply."""

_LOCAL = frozenset({"session_id", "task_id", "agent_id", "budgets", "days_between",
                    "drain_notes", "help"})  # fmt: skip
_DUNDERS = ("__repr__", "__enter__", "__exit__")
_ERROR_MODULES = {"scrollctx.errors": errors, "builtins": builtins, "sqlite3": sqlite3}
_CAUSES = 3


def _public() -> list[str]:
    return [name for name in vars(MemorySurface) if not name.startswith("_")]


def _remote_names() -> tuple[str, ...]:
    return tuple(name for name in _public() if name not in _LOCAL)


REMOTE_METHODS = frozenset(_remote_names())
"""What a request may name: the public members of ``MemorySurface`` that need the store."""


class _RemoteBase:
    """State of a remote ``ms``: its binding, budgets, notes and transport (members are added
    from ``MemorySurface`` below)."""

    __slots__ = ("_binding", "_budgets", "_notes", "_transport")

    def __init__(self, transport: Transport, binding: Binding, budgets: Budgets) -> None:
        self._transport = transport
        self._binding = binding
        self._budgets = budgets
        self._notes: list[str] = []

    def _forward(self, method: str, arguments: dict[str, Any]) -> Any:
        arguments.pop("self", None)
        prepare = _PREPARE.get(method)
        if prepare is not None:
            prepare(arguments)
        reply = self._transport({"method": method, "kwargs": to_wire(arguments)})
        return read_reply(reply, self._notes)


def _prepare_expand(arguments: dict[str, Any]) -> None:
    # Rows, hits or a generator become their seqs here, exactly as MemorySurface.expand reads
    # them (same errors): only ints cross, however large the rows were.
    if arguments.get("last") is None:
        arguments["first"] = _seqs_of(arguments["first"])


def _prepare_sql(arguments: dict[str, Any]) -> None:
    # An iterable of parameters (a generator, a range) is read here as MemorySurface reads it;
    # a bad one is left for the other side, which reports it after checking the SQL, in order.
    params = arguments.get("params")
    if params is not None and not isinstance(params, list | tuple | dict):
        try:
            arguments["params"] = _sql_params(params, "")
        except QueryError:
            pass


_PREPARE: dict[str, Callable[[dict[str, Any]], None]] = {
    "expand": _prepare_expand,
    "sql_query": _prepare_sql,
}


def _forwarder(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """Build a function with ``original``'s exact parameters whose body forwards the call."""
    params, defaults, star = [], {}, False
    for param in inspect.signature(original).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"MemorySurface.{name} has a parameter kind ms cannot forward")
        if param.kind is param.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = param.name
        if param.default is not param.empty:
            defaults[param.name] = param.default
            text += f"=__defaults[{param.name!r}]"
        params.append(text)
    source = f"def {name}({', '.join(params)}):\n    return self._forward({name!r}, locals())\n"
    namespace: dict[str, Any] = {"__defaults": defaults}
    exec(compile(source, f"<ms.{name}>", "exec"), namespace)  # noqa: S102 - generated above
    function: Callable[..., Any] = namespace[name]
    for attribute in ("__qualname__", "__doc__", "__module__", "__annotations__"):
        setattr(function, attribute, getattr(original, attribute))
    return function


def _derive() -> type:
    members: dict[str, Any] = {"__slots__": (), "__doc__": MemorySurface.__doc__}
    for name in _DUNDERS:
        members[name] = vars(MemorySurface)[name]
    for name in _public():
        member = vars(MemorySurface)[name]
        if name in _LOCAL:
            members[name] = member
        elif isinstance(member, property):
            members[name] = property(_property_getter(name), doc=member.__doc__)
        else:
            members[name] = _forwarder(name, member)
    return type("RemoteSurface", (_RemoteBase,), members)


def _property_getter(name: str) -> Callable[[Any], Any]:
    def getter(self: Any) -> Any:
        return self._forward(name, {})

    return getter


if TYPE_CHECKING:

    class RemoteSurface(MemorySurface):
        """``ms`` over a transport: ``MemorySurface``'s API, answered by another process."""

        def __init__(self, transport: Transport, binding: Binding, budgets: Budgets) -> None: ...
else:
    RemoteSurface = _derive()
    RemoteSurface.__module__ = __name__


# -- replies --------------------------------------------------------------------------------


def read_reply(reply: Mapping[str, Any], notes: list[str]) -> Any:
    """Return a reply's value (or raise its error), keeping its notes in ``notes``."""
    notes.extend(_texts(reply.get("notes")))
    if reply.get("ok") is not True:
        raise rebuild_error(reply.get("error"))
    value = reply.get("value")
    if reply.get("tagged") is True:
        value = from_wire(value)
    shape = reply.get("rows")
    if isinstance(shape, Mapping) and isinstance(value, list):
        return ResultRows(
            value,
            notes=_texts(shape.get("notes")),
            partial=shape.get("partial") is True,
            truncated=shape.get("truncated") is True,
        )
    return value


def _texts(raw: Any) -> list[str]:
    return [item for item in raw if isinstance(item, str)] if isinstance(raw, list) else []


def rebuild_error(data: Any, depth: int = 0) -> BaseException:
    """Rebuild an exception described by :func:`describe_error` (untrusted: never raises)."""
    if not isinstance(data, Mapping):
        return RuntimeError("the memory surface sent a malformed reply")
    name, module = str(data.get("type", "")), str(data.get("module", ""))
    found = getattr(_ERROR_MODULES.get(module), name, None)
    cls = cast(type[BaseException], found) if _is_error_class(found) else RuntimeError
    args = from_wire(data.get("args"))
    args = tuple(args) if isinstance(args, list | tuple) else ()
    exc = _construct(cls, args, f"{name}: {', '.join(map(str, args))}")
    attrs = from_wire(data.get("attrs"))
    for key, value in attrs.items() if isinstance(attrs, dict) else ():
        if isinstance(key, str) and key.isidentifier() and not key.startswith("_"):
            setattr(exc, key, value)
    cause = data.get("cause")
    if cause is not None and depth < _CAUSES:
        exc.__cause__ = rebuild_error(cause, depth + 1)
        exc.__suppress_context__ = True
    return exc


def _is_error_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Exception | KeyboardInterrupt)


def _construct(cls: type[BaseException], args: tuple[Any, ...], fallback: str) -> BaseException:
    # Built from its args as raised (UnicodeEncodeError's five); a class whose constructor
    # takes other arguments than it stores (MissingDependency(package, extra)) is made
    # without running it: same class, same args, attributes set by the caller.
    try:
        return cls(*args)
    except Exception:  # noqa: BLE001 - any constructor may refuse these args
        pass
    try:
        exc = cls.__new__(cls, *args)
        str(exc)  # a class whose str() needs what __init__ sets cannot be used this way
    except Exception:  # noqa: BLE001 - then only the fallback is left
        return RuntimeError(fallback)
    return exc


def describe_error(exc: BaseException, depth: int = 0) -> dict[str, Any]:
    """Return the wire description of ``exc`` (class, arguments, attributes, cause)."""
    cause = exc.__cause__
    return {
        "module": type(exc).__module__,
        "type": type(exc).__name__,
        "args": to_wire(list(exc.args)),
        "attrs": to_wire({k: v for k, v in vars(exc).items() if not k.startswith("_")}),
        "cause": describe_error(cause, depth + 1) if cause is not None and depth < _CAUSES
        else None,
    }  # fmt: skip


def error_reply(call: Any, exc: BaseException, notes: Iterable[str] = ()) -> bytes:
    """Return the reply bytes that make the caller raise ``exc``."""
    reply = {"op": "ms_result", "call": call, "ok": False, "notes": list(notes),
             "error": describe_error(exc)}  # fmt: skip
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


# -- the answering side ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """One call's outcome before its reply is written: its error, or its value already encoded
    (the reply's tail); and the notes it kept. The reply names the call, which may be known
    only later: a call answered ahead (:mod:`scrollctx.kernel._ahead`)."""

    method: object
    error: BaseException | None = None
    notes: tuple[str, ...] = ()
    shape: dict[str, Any] | None = None
    """A :class:`ResultRows` value's own notes, ``partial`` and ``truncated``."""
    encoded: bytes = b""
    """The value's part of the reply: ``,"tagged":…,"value":…}``."""

    def reply(self, call: Any, limit: int) -> bytes:
        """The reply bytes for request ``call``: at most ``limit`` of them, or an error saying
        the result is too big."""
        if self.error is not None:
            return error_reply(call, self.error, self.notes)
        head: dict[str, Any] = {"op": "ms_result", "call": call, "ok": True,
                                "notes": list(self.notes)}  # fmt: skip
        if self.shape is not None:
            head["rows"] = self.shape
        opening = json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1]
        body = opening.encode("utf-8", "replace") + self.encoded
        if len(body) > limit:
            too_big = QueryError(
                f"the result of ms.{self.method} takes {len(body):,} bytes, over the {limit:,}-"
                "byte limit of one ms call; ask for less: fewer rows (k=, LIMIT), shorter "
                "values (chars=, substr(content, 1, N)), fewer columns"
            )
            return error_reply(call, too_big)
        return body


def run_call(surface: MemorySurface, message: Mapping[str, Any], *, memory_hint: str) -> Answer:
    """Run one request on ``surface``; never raises for what the request holds.

    ``memory_hint`` finishes the message of a call that ran out of memory (the answering
    process knows its own limits).
    """
    method = message.get("method")
    try:
        value = _run(surface, method, message.get("kwargs"))
    except MemoryError:
        failure = QueryError(f"ms.{method} ran out of memory: {memory_hint}")
        return Answer(method, error=failure, notes=tuple(surface.drain_notes()))
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the caller raises it
        return Answer(method, error=exc, notes=tuple(surface.drain_notes()))
    shape = None
    if isinstance(value, ResultRows):
        shape = {"notes": value.notes, "partial": value.partial, "truncated": value.truncated}
    text, tagged = dumps(value)
    encoded = f',"tagged":{"true" if tagged else "false"},"value":{text}}}'
    return Answer(method, notes=tuple(surface.drain_notes()), shape=shape,
                  encoded=encoded.encode("utf-8", "replace"))  # fmt: skip


def _run(surface: MemorySurface, method: object, raw: object) -> Any:
    if not isinstance(method, str) or method not in REMOTE_METHODS:
        raise QueryError(f"ms has no call named {str(method)[:80]!r}")
    kwargs = from_wire(raw)
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise QueryError(f"ms.{method} received malformed arguments")
    if isinstance(vars(MemorySurface)[method], property):
        return getattr(surface, method)
    return getattr(surface, method)(**kwargs)
