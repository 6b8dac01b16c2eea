"""Programmatic tool calling: host callables that appear in the kernel as functions.

The host describes each declared callable (:func:`describe_tool`: name, parameters, docstring)
and sends the descriptions at boot; the worker turns each into a stub (:func:`make_stub`) with the
same name, signature (as shown by ``help``) and docstring. Calling a stub checks the arguments
against the signature, sends a ``tool_call`` frame and blocks until the host answers; a failure
on the host comes back as :class:`ToolCallError`. Arguments and results cross as JSON, so only
JSON-able values pass. The worker can name only what the host declared: the host looks each
call up by name in its own table and runs nothing else. A parameter default that is long or
holds a host environment value is described as ``...``, so no secret crosses in a signature.

Calls are attributed to the cell that makes them: only the running cell and the threads it
started may call a tool (one call at a time); a thread an earlier cell left running gets a
:class:`ToolCallError` instead, so a logged call never names a cell that did not make it. The
host bounds calls per cell and per session (``Kernel(max_tool_calls=, session_tool_calls=,
session_log_bytes=)``); a call the Event Log cannot record is not run, and a result it cannot
record is withheld, each with a :class:`ToolCallError` that says so.
"""

from __future__ import annotations

import inspect
import json
import keyword
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrollctx.errors import ProtocolError, StoreError, UsageError
from scrollctx.kernel._frames import MAX_FRAME, encode_frame

if TYPE_CHECKING:
    from scrollctx.kernel._journal import KernelJournal

__all__ = [
    "MAX_TOOL_INPUT",
    "BridgedCall",
    "RESERVED_NAMES",
    "ToolCallError",
    "ToolGroup",
    "ToolSpec",
    "answer_tool_call",
    "bind_stubs",
    "describe_tool",
    "describe_tools",
    "make_stub",
    "refuse_tool_call",
]

MAX_TOOL_INPUT = 256 * 1024
"""The default cap, in bytes of frame, on one bridged call's arguments (the log keeps them)."""

RESERVED_NAMES = frozenset({"ms", "days_between", "or_terms", "ToolCallError"})
"""Names the kernel binds itself; a tool may not take them."""


class ToolCallError(Exception):
    """A bridged tool failed on the host; the message names the tool and the host's error."""


ToolCallError.__module__ = "tools"  # tracebacks in the kernel read ``tools.ToolCallError``


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A declared tool: the host callable plus the description the worker needs."""

    name: str
    func: Callable[..., Any]
    params: tuple[dict[str, Any], ...]
    doc: str
    returns: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON description sent to the worker."""
        return {
            "name": self.name,
            "params": list(self.params),
            "doc": self.doc,
            "returns": self.returns,
        }


def describe_tool(func: Callable[..., Any], name: str | None = None) -> ToolSpec:
    """Describe a host callable as a tool; raise :class:`UsageError` if it cannot be one.

    A dotted ``name`` (``"git.git_status"``) puts the tool in a group the kernel binds as one
    name (``git``), so a cell calls ``git.git_status(...)``.
    """
    tool_name = str(name or getattr(func, "__name__", ""))
    parts = tool_name.split(".")
    if len(parts) > 2 or not all(_public_identifier(part) for part in parts):
        raise UsageError(
            f"tool name {tool_name!r} is not a public Python identifier (or GROUP.NAME); pass "
            "a name= that is"
        )
    if parts[0] in RESERVED_NAMES:
        raise UsageError(f"tool name {parts[0]!r} is reserved by the kernel; rename the tool")
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"tool {tool_name!r} has no readable signature ({exc})") from exc
    params = tuple(_describe_param(p) for p in signature.parameters.values())
    returns = signature.return_annotation
    shown = None if returns is inspect.Signature.empty else _type_text(returns)
    return ToolSpec(tool_name, func, params, inspect.getdoc(func) or "", shown)


def describe_tools(
    tools: Iterable[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
) -> dict[str, ToolSpec]:
    """Describe several tools (a list of callables or a name -> callable mapping)."""
    pairs = (
        list(tools.items())
        if isinstance(tools, Mapping)
        else [(getattr(f, "__name__", ""), f) for f in tools]
    )
    specs: dict[str, ToolSpec] = {}
    for name, func in pairs:
        spec = describe_tool(func, name)
        if spec.name in specs:
            raise UsageError(f"two tools are named {spec.name!r}; tool names must be unique")
        specs[spec.name] = spec
    groups = {name.split(".")[0] for name in specs if "." in name}
    if clash := sorted(groups & set(specs)):
        raise UsageError(f"{', '.join(clash)} names both a tool and a group of tools; rename one")
    return specs


def _public_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def _describe_param(param: inspect.Parameter) -> dict[str, Any]:
    item: dict[str, Any] = {"name": param.name, "kind": int(param.kind)}
    if param.default is not inspect.Parameter.empty:
        item["default"] = _shown_default(param.default)
    if param.annotation is not inspect.Parameter.empty:
        item["annotation"] = _type_text(param.annotation)
    return item


_DEFAULT_CHARS = 80
_SECRET_MIN = 8


def _shown_default(value: Any) -> str:
    # A default travels to the model's kernel: one that is long, or that contains the value of
    # any host environment variable (``key=os.environ["API_KEY"]``), is shown as ``...``.
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a host object whose repr fails is simply not shown
        return "..."
    if len(text) > _DEFAULT_CHARS:
        return "..."
    secrets = (v for v in os.environ.values() if len(v) >= _SECRET_MIN)
    return "..." if any(secret in text for secret in secrets) else text


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


class _Shown:
    """Renders as the given text inside a signature (a default or annotation from the host)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


Caller = Callable[[str, list[Any], dict[str, Any]], Any]


class ToolGroup:
    """The tools of one group in the kernel (``git.git_status``): attributes, one per tool."""

    def __init__(self, name: str, tools: Mapping[str, Callable[..., Any]]) -> None:
        self.__name__ = name
        self.__dict__.update(tools)

    def __repr__(self) -> str:
        names = ", ".join(sorted(k for k in vars(self) if not k.startswith("_")))
        return f"<tools {self.__name__}: {names}; help({self.__name__}.NAME) shows one>"


ToolGroup.__module__ = "tools"


def bind_stubs(specs: Iterable[Mapping[str, Any]], call: Caller) -> dict[str, Any]:
    """The kernel names of the declared tools: each stub, dotted ones gathered in groups."""
    bound: dict[str, Any] = {}
    grouped: dict[str, dict[str, Callable[..., Any]]] = {}
    for spec in specs:
        group, _, tool = str(spec["name"]).rpartition(".")
        if group:
            grouped.setdefault(group, {})[tool] = make_stub(spec, call)
        else:
            bound[tool] = make_stub(spec, call)
    bound.update({name: ToolGroup(name, tools) for name, tools in grouped.items()})
    return bound


def make_stub(spec: Mapping[str, Any], call: Caller) -> Callable[..., Any]:
    """Build the worker-side function for one tool description; ``call`` crosses to the host."""
    name = str(spec["name"])
    signature = _signature(spec.get("params", []), spec.get("returns"))

    def stub(*args: Any, **kwargs: Any) -> Any:
        signature.bind(*args, **kwargs)  # a wrong call fails here, like a local function
        return call(name, list(args), kwargs)

    stub.__name__ = name.rpartition(".")[2]
    stub.__qualname__ = name
    stub.__doc__ = str(spec.get("doc", ""))
    stub.__module__ = "tools"
    stub.__signature__ = signature  # type: ignore[attr-defined]
    return stub


def _signature(params: Iterable[Mapping[str, Any]], returns: Any) -> inspect.Signature:
    built = []
    for item in params:
        default = _Shown(item["default"]) if "default" in item else inspect.Parameter.empty
        annotation = _Shown(item["annotation"]) if "annotation" in item else inspect.Parameter.empty
        kind = inspect._ParameterKind(int(item["kind"]))
        built.append(inspect.Parameter(item["name"], kind, default=default, annotation=annotation))
    shown = inspect.Signature.empty if returns is None else _Shown(str(returns))
    return inspect.Signature(built, return_annotation=shown)


def _checked(frame: Mapping[str, Any]) -> tuple[int, str, list[Any], dict[str, Any]]:
    call, name = frame.get("call"), frame.get("name")
    args, kwargs = frame.get("args"), frame.get("kwargs")
    if not (isinstance(call, int) and isinstance(name, str) and isinstance(args, list)
            and isinstance(kwargs, dict)):  # fmt: skip
        raise ProtocolError("malformed tool_call frame; the worker is restarted")
    return call, name[:200], args, kwargs


def refuse_tool_call(frame: Mapping[str, Any], request: int, error: str) -> bytes:
    """Answer a ``tool_call`` frame with ``error`` without running or logging anything."""
    call, _, _, _ = _checked(frame)
    return _failed(request, call, error)


def _failed(request: int, call: int, error: str) -> bytes:
    return encode_frame(request, {"op": "tool_result", "call": call, "ok": False, "error": error})


@dataclass(frozen=True, slots=True)
class BridgedCall:
    """How the host answered one bridged call."""

    reply: bytes
    """The ``tool_result`` frame for the worker."""
    tool_call_id: str
    logged_bytes: int
    """Bytes of arguments and result this call put in the Event Log (roughly)."""
    store_error: str | None = None
    """Why the Event Log refused to record the call or its result, if it did."""


def answer_tool_call(
    frame: Mapping[str, Any],
    tools: Mapping[str, ToolSpec],
    journal: KernelJournal,
    cell: int,
    *,
    request: int,
    size: int = 0,
    max_input: int = MAX_TOOL_INPUT,
) -> BridgedCall:
    """Run one ``tool_call`` frame (of ``size`` bytes, for ``request``) on the host.

    The frame is untrusted: a malformed one raises :class:`ProtocolError`; a name the host did
    not declare is answered with an error (and logged); the call is logged before it runs, and
    is not run when the Event Log refuses that record. A call over ``max_input`` bytes (the
    frame's size, or the size the worker says it left out) is logged without its arguments and
    not run. A result the Event Log refuses to record is withheld from the cell.
    """
    from scrollctx.log import stored_size  # the host's side only: the worker never loads the log

    call, name, args, kwargs = _checked(frame)
    omitted = frame.get("omitted")
    if isinstance(omitted, int) and not isinstance(omitted, bool) and omitted > size:
        size = omitted
    tool_call_id = f"kcall_{uuid.uuid4().hex[:16]}"
    error = (
        f"the arguments to {name}() take {size:,} bytes, over the {max_input:,}-byte limit "
        "of one tool call; pass less (a key, an id, a slice)"
    )
    tool_input = {"omitted": error} if size > max_input else {"args": args, "kwargs": kwargs}
    try:
        journal.tool_call(name, tool_call_id, tool_input, cell)
    except StoreError as exc:
        refused = f"{name}() was not run: the Event Log could not record the call ({exc})"
        return BridgedCall(_failed(request, call, refused), tool_call_id, 0, str(exc))
    ok, value = False, None
    if size <= max_input:
        ok, value, error = _invoke(tools, name, args, kwargs)
    reply = b""
    if ok:
        try:
            reply = encode_frame(request, {"op": "tool_result", "call": call, "ok": True,
                                           "value": value})  # fmt: skip
        except (TypeError, ValueError) as exc:
            ok, error = False, f"{name} returned a {type(value).__name__}, not JSON-able ({exc})"
        if ok and len(reply) > MAX_FRAME:
            ok, error = False, f"{name} returned {len(reply):,} bytes, over the frame limit"
    content = json.dumps(value, ensure_ascii=False, default=repr) if ok else error
    logged = stored_size(tool_input) + stored_size(content)  # bytes, as the log holds them
    try:
        journal.tool_result(name, tool_call_id, content, ok=ok, cell=cell)
    except StoreError as exc:
        withheld = (
            f"{name}() ran, but the Event Log could not record its result ({exc}); the result "
            "is withheld"
        )
        return BridgedCall(_failed(request, call, withheld), tool_call_id, logged, str(exc))
    if not ok:
        reply = _failed(request, call, error)
    return BridgedCall(reply, tool_call_id, logged)


def _invoke(
    tools: Mapping[str, ToolSpec], name: str, args: list[Any], kwargs: dict[str, Any]
) -> tuple[bool, Any, str]:
    spec = tools.get(name)
    if spec is None:
        declared = ", ".join(sorted(tools)) or "none"
        return False, None, f"no tool named {name!r} is declared to this kernel ({declared})"
    try:
        return True, spec.func(*args, **kwargs), ""
    except Exception as exc:  # noqa: BLE001 - a failing tool is the cell's observation
        return False, None, f"{name}: {type(exc).__name__}: {exc}"
