"""The agent's tools: what the model may call, how each runs, and how users add their own.

A model-visible tool is an :class:`AgentTool`: a name, a description read from package data, a
JSON Schema, and a ``run(args, context)`` that returns an :class:`Observation` (the exact text the
model receives). A :class:`Toolset` is the set a run offers; it is a parameter of the loop, so
the evaluation suite can compare toolsets:

- :func:`scroll_toolset` (default): ``repl_exec``, ``recall_history_python``, ``submit_answer``.
  Both cell tools run in the same persistent kernel, with ``ms`` pre-bound and the user's kernel
  functions bridged in; ``recall_history_python`` observations are logged ``searchable=False``,
  so a later search never finds the echo of an earlier recall.
- :func:`json_memory_toolset` ("Scroll without the REPL"): ``ms_search``, ``ms_expand``,
  ``ms_sql_query`` as ordinary JSON tool calls, plus ``submit_answer``. They run in a memory
  reader process (:class:`~scrollctx.kernel.MemoryReader`), never in the host: a query bomb
  costs that process, and every failure, whatever the arguments, is a tool error.

User tools: decorate a function with :func:`tool` (or ``agent.tool``). ``expose="kernel"``
(default) bridges it into the kernel as a function cells call by name (programmatic tool
calling: results stay in variables); ``expose="model"`` makes it a JSON tool the model calls
directly; ``expose="both"`` does both. Arguments and results must be JSON-able.

Invariant: ``submit_answer`` ends a run by raising :class:`AnswerSubmitted`, which derives from
``BaseException`` so that no ``except Exception`` in tool code can swallow it; only the loop's
tool-answering step (``_answers.answer_call``) catches it. Inside a cell, ``submit_answer`` is a
bridged function that records the answer on the host; the loop raises the signal after the
cell returns. The first answer a cell submits is the answer (a later call returns a notice and
changes nothing).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from scrollctx.agent._prompts import Capabilities, describe_function, tool_description
from scrollctx.agent.backends import ToolSpec
from scrollctx.errors import UsageError
from scrollctx.kernel import (
    OPT_OUT,
    CellResult,
    Kernel,
    MemoryReader,
    SandboxPolicy,
    describe_tool,
    reader_opt_out,
    render_digest,
    render_observation,
    resolve_policy,
)
from scrollctx.log import EventStore
from scrollctx.surface import Budgets, RemoteSurface, format_notes
from scrollctx.surface._filters import Binding

if TYPE_CHECKING:
    from scrollctx.agent._mcp import McpHub

__all__ = [
    "AgentTool",
    "AnswerSubmitted",
    "Observation",
    "ToolContext",
    "Toolset",
    "UserTool",
    "json_memory_toolset",
    "scroll_toolset",
    "tool",
]

Expose = Literal["kernel", "model", "both"]
_OBSERVATION_CAP = 32_000
_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


class AnswerSubmitted(BaseException):  # noqa: N818 - a signal, not an error
    """The model submitted its final answer; only ``answer_call`` catches this."""

    def __init__(self, answer: str) -> None:
        super().__init__(answer)
        self.answer = answer


@dataclass(frozen=True, slots=True)
class Observation:
    """What one tool call returns to the model."""

    text: str
    ok: bool = True


@dataclass(frozen=True, slots=True)
class UserTool:
    """A user function registered with :func:`tool`; see the module docstring for ``expose``."""

    func: Callable[..., Any]
    name: str
    expose: Expose = "kernel"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    @property
    def in_kernel(self) -> bool:
        """Whether cells can call it by name."""
        return self.expose in ("kernel", "both")

    @property
    def for_model(self) -> bool:
        """Whether the model can call it as a JSON tool."""
        return self.expose in ("model", "both")

    def as_agent_tool(self) -> AgentTool:
        """Return the JSON tool that runs this function on the host."""
        doc = inspect.getdoc(self.func) or f"Call {self.name}."
        return AgentTool(self.name, doc, _schema(self.func), self._run)

    def _run(self, args: Mapping[str, Any], context: ToolContext) -> Observation:
        try:
            value = self.func(**args)
        except TypeError as exc:
            return Observation(f"error: {self.name} was called wrongly: {exc}", ok=False)
        except Exception as exc:  # noqa: BLE001 - a failing user tool is the model's observation
            return Observation(f"error: {self.name}: {type(exc).__name__}: {exc}", ok=False)
        text = value if isinstance(value, str) else json.dumps(value, default=str, indent=1)
        return Observation(_cap(text))


@overload
def tool(func: Callable[..., Any], *, name: str | None = ..., expose: Expose = ...) -> UserTool: ...
@overload
def tool(
    func: None = None, *, name: str | None = ..., expose: Expose = ...
) -> Callable[[Callable[..., Any]], UserTool]: ...
def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    expose: Expose = "kernel",
) -> UserTool | Callable[[Callable[..., Any]], UserTool]:
    """Register a function as an agent tool (see the module docstring for ``expose``).

    Example::

        @tool
        def lookup_order(order_id: str) -> dict:
            \"\"\"Return the order with this id.\"\"\"
            return ORDERS[order_id]

        Agent(model="openai:gpt-4o-mini", tools=[lookup_order])
    """
    if expose not in ("kernel", "model", "both"):
        raise UsageError(f"expose must be 'kernel', 'model' or 'both', got {expose!r}")

    def wrap(target: Callable[..., Any]) -> UserTool:
        tool_name = str(name or getattr(target, "__name__", ""))
        if not tool_name.isidentifier():
            raise UsageError(f"tool name {tool_name!r} is not a Python identifier; pass name=")
        made = UserTool(target, tool_name, expose)
        if made.in_kernel:
            describe_tool(target, tool_name)  # a reserved or unusable name fails here, not mid-run
        return made

    return wrap(func) if func is not None else wrap


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class AgentTool:
    """A tool the model may call; ``searchable`` says whether its observations enter search.

    ``available`` is asked before each request: a tool whose provider went away (an MCP server
    that died) leaves the request's tool list.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], ToolContext], Observation]
    searchable: bool = True
    runs_code: bool = False
    available: Callable[[], bool] = _always

    def spec(self) -> ToolSpec:
        """Return the provider-neutral tool description."""
        return ToolSpec(self.name, self.description, dict(self.parameters))


@dataclass(frozen=True, slots=True)
class Toolset:
    """The model-visible tools of a run plus the functions bridged into its kernel."""

    tools: tuple[AgentTool, ...]
    kernel_functions: tuple[UserTool, ...] = ()

    def __post_init__(self) -> None:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"two tools share the name {', '.join(duplicates)}; rename one")

    def get(self, name: str) -> AgentTool | None:
        """Return the tool called ``name``, or None."""
        return next((t for t in self.tools if t.name == name), None)

    def specs(self) -> list[ToolSpec]:
        """The tool descriptions sent to the model (the available tools)."""
        return [t.spec() for t in self.tools if t.available()]

    @property
    def code_tool(self) -> AgentTool | None:
        """The tool a fenced code block runs as (models without tool calls), if any."""
        return self.get("repl_exec") or self.get("recall_history_python")

    def prompt_lines(self) -> list[str]:
        """One line per tool for the system prompt, which is fixed for a session: tools that
        may go away (their ``available`` can change) appear only in each request's tool list."""
        listed = [t for t in self.tools if t.available is _always]
        return [f"- `{t.name}`: {t.description.splitlines()[0]}" for t in listed]

    def function_lines(self) -> list[str]:
        """One line per kernel function for the system prompt."""
        return [describe_function(f.func, f.name) for f in self.kernel_functions]

    def capabilities(self, *, index: bool = True) -> Capabilities:
        """What the prompts may tell the model about (``index``: the policy shows one)."""
        kernel = any(t.runs_code for t in self.tools)
        return Capabilities.of((t.name for t in self.tools), kernel=kernel, index=index)


class ToolContext:
    """What tools reach during a run: the log, the session, a lazily started kernel, ``ms``.

    One context serves one session (all runs of a chat); :meth:`close` stops the kernel.
    ``run_cells`` runs cells elsewhere instead of in a kernel of this context (a front door's
    shared kernels, one per client session): then this context starts no kernel of its own.
    """

    def __init__(
        self,
        log: EventStore,
        *,
        session_id: str,
        task_id: str | None = None,
        agent_id: str | None = None,
        scratch: str | Path | None = None,
        sandbox: str | SandboxPolicy = "strict",
        kernel_functions: Sequence[UserTool] = (),
        cell_timeout: float = 60.0,
        mcp: McpHub | None = None,
        run_cells: Callable[[str], CellResult] | None = None,
        opt_out: str = OPT_OUT,
    ) -> None:
        self.log = log
        self._run_cells = run_cells
        self.session_id, self.task_id, self.agent_id = session_id, task_id, agent_id
        self.scratch, self.sandbox, self.cell_timeout = scratch, sandbox, cell_timeout
        self.opt_out = opt_out
        """How a refused cell tells the user to opt out (the front door's own flag)."""
        self.kernel_functions = tuple(kernel_functions)
        self.mcp = mcp
        """The session's MCP servers (their tools are bridged into the kernel); closed here."""
        self.cell_digest = ""
        self.submitted: str | None = None
        self._kernel: Kernel | None = None
        self._reader: MemoryReader | None = None
        self._surface: RemoteSurface | None = None

    @property
    def kernel(self) -> Kernel:
        """The session's kernel, started on first use."""
        if self._kernel is None:
            functions: dict[str, Callable[..., Any]] = {
                f.name: f.func for f in self.kernel_functions
            }
            functions["submit_answer"] = self._record_answer
            if self.mcp is not None:
                functions.update(self.mcp.kernel_functions())
            self._kernel = Kernel(
                event_log=self.log,
                session_id=self.session_id,
                task_id=self.task_id,
                agent_id=self.agent_id,
                scratch=self.scratch,
                sandbox=self.sandbox,
                tools=functions,
                timeout=self.cell_timeout,
                opt_out=self.opt_out,
            )
            self._kernel.start()
        return self._kernel

    @property
    def surface(self) -> RemoteSurface:
        """An ``ms`` bound like the kernel's, answered by a memory reader (JSON memory tools)."""
        self.log.refresh()  # a shared store's replica gets every host's newest rows first
        if self._surface is None:
            binding = Binding(self.session_id, self.task_id, self.agent_id)
            self._reader = MemoryReader(
                self.log.path.resolve(),
                binding,
                policy=resolve_policy(self.sandbox),
                opt_out=reader_opt_out(self.opt_out),
            )
            self._surface = RemoteSurface(self._reader.request, binding, Budgets())
        return self._surface

    @property
    def digest(self) -> str:
        """The kernel's state for the next request: the last cell's namespace digest, then the
        MCP tools callable now (a server that went down is named instead of its tools)."""
        tools = self.mcp.describe() if self.mcp is not None else ""
        return "\n\n".join(part for part in (self.cell_digest, tools) if part)

    def run_cell(self, source: str) -> CellResult:
        """Run a cell in the kernel and remember its namespace digest."""
        result = self._run_cells(source) if self._run_cells else self.kernel.run_cell(source)
        self.cell_digest = render_digest(result.digest, result.digest_more)
        return result

    def take_submitted(self) -> str | None:
        """Return and clear an answer a cell submitted."""
        answer, self.submitted = self.submitted, None
        return answer

    def _record_answer(self, answer: str) -> str:
        """Submit your final answer and end the task."""
        text = str(answer).strip()
        if not text:
            raise ValueError("the answer is empty; pass a non-empty answer")
        if self.submitted is not None:
            # The first answer stands, as with submit_answer tool calls: later ones are not run.
            return "not recorded: an answer was already submitted in this cell"
        self.submitted = text
        return "answer recorded"

    def close(self) -> None:
        """Stop the kernel, the MCP servers and the memory reader."""
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        if self.mcp is not None:
            self.mcp.close()
            self.mcp = None
        if self._reader is not None:
            self._reader.close()
            self._reader = self._surface = None


# -- built-in tools ------------------------------------------------------------------------


def _string_params(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string"} for n in names},
        "required": list(names),
    }


def _run_code(args: Mapping[str, Any], context: ToolContext) -> Observation:
    source = args.get("source")
    if not isinstance(source, str) or not source.strip():
        return Observation("error: pass the cell as a non-empty string argument `source`", False)
    result = context.run_cell(source)
    answer = context.take_submitted()
    if answer is not None:
        raise AnswerSubmitted(answer)
    return Observation(render_observation(result), result.ok)


def _submit(args: Mapping[str, Any], context: ToolContext) -> Observation:
    answer = args.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        return Observation("error: submit_answer needs a non-empty string `answer`", ok=False)
    raise AnswerSubmitted(answer.strip())


def submit_tool() -> AgentTool:
    """The ``submit_answer`` tool."""
    return AgentTool(
        "submit_answer", tool_description("submit_answer"), _string_params("answer"), _submit
    )


def scroll_toolset(user_tools: Iterable[UserTool] = ()) -> Toolset:
    """Scroll's tools: ``repl_exec``, ``recall_history_python``, ``submit_answer``, user tools."""
    tools = list(user_tools)
    return Toolset(
        (
            AgentTool(
                "repl_exec",
                tool_description("repl_exec"),
                _string_params("source"),
                _run_code,
                runs_code=True,
            ),
            AgentTool(
                "recall_history_python",
                tool_description("recall_history_python"),
                _string_params("source"),
                _run_code,
                searchable=False,
                runs_code=True,
            ),
            submit_tool(),
            *(t.as_agent_tool() for t in tools if t.for_model),
        ),
        tuple(t for t in tools if t.in_kernel),
    )


def json_memory_toolset(user_tools: Iterable[UserTool] = ()) -> Toolset:
    """Scroll without the REPL: ``ms`` calls as JSON tools run on the host, and submit_answer."""
    tools = [t for t in user_tools if t.for_model]
    search_params = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "k": {"type": "integer"},
            "kind": {"type": "string"},
            "role": {"type": "string"},
            "mode": {"type": "string", "enum": ["bm25", "semantic", "hybrid"]},
        },
        "required": ["query"],
    }
    expand_params = {
        "type": "object",
        "properties": {
            "seqs": {"type": "array", "items": {"type": "integer"}},
            "lo": {"type": "integer"},
            "hi": {"type": "integer"},
        },
    }
    return Toolset(
        (
            AgentTool("ms_search", tool_description("ms_search"), search_params, _ms_search, False),
            AgentTool("ms_expand", tool_description("ms_expand"), expand_params, _ms_expand, False),
            AgentTool(
                "ms_sql_query",
                tool_description("ms_sql_query"),
                _string_params("sql"),
                _ms_sql,
                False,
            ),
            submit_tool(),
            *(t.as_agent_tool() for t in tools),
        )
    )


def _ms_search(args: Mapping[str, Any], context: ToolContext) -> Observation:
    keys = ("k", "kind", "role", "mode")
    options = {key: args[key] for key in keys if args.get(key) is not None}
    return _ms_call(context, lambda ms: ms.search(str(args.get("query", "")), **options))


def _ms_expand(args: Mapping[str, Any], context: ToolContext) -> Observation:
    lo, hi, seqs = args.get("lo"), args.get("hi"), args.get("seqs")
    if lo is not None or hi is not None:
        # Any values at all: the surface checks them (ints only, of any size) and says why.
        return _ms_call(context, lambda ms: ms.expand(lo, hi if hi is not None else lo))
    return _ms_call(context, lambda ms: ms.expand(seqs if seqs is not None else []))


def _ms_sql(args: Mapping[str, Any], context: ToolContext) -> Observation:
    return _ms_call(context, lambda ms: ms.sql_query(str(args.get("sql", ""))))


def _ms_call(context: ToolContext, call: Callable[[RemoteSurface], Any]) -> Observation:
    surface = context.surface
    try:
        rows = call(surface)
    except Exception as exc:  # noqa: BLE001 - raised by the reader process or the arguments
        return Observation(f"error: {type(exc).__name__}: {exc}", ok=False)
    notes = format_notes(surface.drain_notes())
    text = json.dumps(rows, ensure_ascii=False, default=repr, indent=1)
    return Observation(_cap(text + (f"\n{notes}" if notes else "")))


def _cap(text: str) -> str:
    if len(text) <= _OBSERVATION_CAP:
        return text
    hidden = len(text) - _OBSERVATION_CAP
    return text[:_OBSERVATION_CAP] + f"\n[output cut: {hidden:,} more characters hidden]"


def _schema(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(func)
    except (NameError, TypeError):
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        kind = _JSON_TYPES.get(typing.get_origin(hints.get(param.name)) or hints.get(param.name))
        properties[param.name] = {"type": kind} if kind else {}
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required}
