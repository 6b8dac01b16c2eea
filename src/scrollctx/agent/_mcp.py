"""Tools of other MCP servers for Scroll's agent: started, listed, called, bridged into the kernel.

:class:`McpHub` runs every server of a session on one event-loop thread (anyio's blocking
portal) with the official SDK client, over stdio (the hub starts the command) or streamable
HTTP. Each tool becomes a host function whose signature comes from the tool's input schema and
whose docstring is its description; the kernel's tool bridge exposes it as ``NAME.tool(**args)``
(each call and its full result logged as ``tool_call``/``tool_result`` events), and with
``expose = "both"`` it is also offered to the model as a JSON tool ``NAME__tool``. A result comes
back as a Python object: the structured content as a dict, else the text as a str.

Invariants:

- never a hang: a server gets ``startup_timeout`` seconds to start and list its tools, a call
  ``timeout`` seconds (keep it under the kernel's cell timeout: a bridged call holds the cell);
  a server that misses either is stopped;
- a server that fails to start, dies or stops answering is *down*, with the reason (its exit,
  the tail of its stderr): each call of its tools raises :class:`ToolServerError` at once saying
  so, :meth:`McpHub.describe` lists it as gone instead of its tools, and its JSON tools leave the
  next request. A tool that answers with an error raises too, and its server stays up;
- the servers are the user's programs: they run outside the sandbox with the user's rights, like
  any host tool; the model reaches only the tools they list, with the arguments it chose.
"""

from __future__ import annotations

import inspect
import keyword
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, Tool

from scrollctx.agent._mcp_spec import McpServerSpec
from scrollctx.agent._tools import AgentTool, UserTool
from scrollctx.errors import ToolServerError

__all__ = ["McpHub"]

_STOP_WAIT = 15.0
_TAIL = 600
_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
               "array": "list", "object": "dict", "null": "None"}  # fmt: skip


@dataclass(eq=False)
class _Server:
    spec: McpServerSpec
    errlog: Path
    ready: threading.Event = field(default_factory=threading.Event)
    client: Client | None = None
    tools: list[Tool] = field(default_factory=list)
    down: str | None = None
    """Why the server cannot be used (None while it serves)."""
    stop: anyio.Event | None = None
    task: Future[None] | None = None

    @property
    def name(self) -> str:
        return self.spec.name


class McpHub:
    """The MCP servers of one session: start them, describe them, call their tools, stop them.

    Example::

        with McpHub([McpServerSpec.parse("time=mcp-server-time")]) as hub:
            print(hub.call("time", "get_current_time", {"timezone": "UTC"})["datetime"])
    """

    def __init__(self, specs: Sequence[McpServerSpec]) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ToolServerError(f"two MCP servers share a name: {names}", server="", gone=False)
        self._files = ExitStack()
        folder = Path(self._files.enter_context(tempfile.TemporaryDirectory(prefix="scroll-mcp-")))
        self.servers = {spec.name: _Server(spec, folder / f"{spec.name}.stderr") for spec in specs}
        self._portal_cm = anyio.from_thread.start_blocking_portal(name="scroll-mcp")
        self._portal = self._files.enter_context(self._portal_cm)

    def __enter__(self) -> McpHub:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start every server at once and wait until each serves or is down (bounded)."""
        started = time.monotonic()
        for server in self.servers.values():
            server.task = self._portal.start_task_soon(self._serve, server)
        for server in self.servers.values():
            left = started + server.spec.startup_timeout - time.monotonic()
            if not server.ready.wait(max(0.0, left)):
                self._stop(server, f"it did not start within {server.spec.startup_timeout:g} s")

    def close(self) -> None:
        """Stop every server (each within a few seconds) and the event-loop thread."""
        for server in self.servers.values():
            self._stop(server, "the session ended")
        self._files.close()

    async def _serve(self, server: _Server) -> None:
        server.stop = anyio.Event()
        try:
            async with self._connect(server) as client:
                listed = await client.list_tools()
                server.client, server.tools = client, list(listed.tools)
                server.ready.set()
                await server.stop.wait()
        except Exception as exc:  # noqa: BLE001 - whatever stopped it is the reason, reported
            if server.down is None:
                server.down = f"it failed to start: {_reason(exc)}{_tail(server.errlog)}"
        finally:
            server.client = None
            server.ready.set()

    def _connect(self, server: _Server) -> AbstractAsyncContextManager[Client]:
        spec = server.spec
        if spec.url is not None:
            return _http_client(spec)
        params = StdioServerParameters(
            command=spec.command[0], args=list(spec.command[1:]), env=dict(spec.env)
        )
        return _stdio_client(params, server.errlog)

    def _stop(self, server: _Server, reason: str) -> None:
        if server.down is None:
            server.down = reason
        task = server.task
        if task is None or task.done():
            return
        if server.client is not None and server.stop is not None:
            self._portal.call(server.stop.set)  # leave the client: closing stdin stops it
            try:
                task.result(timeout=_STOP_WAIT)
                return
            except TimeoutError:
                pass
        # Still starting, or not leaving: cancel the task; the SDK's shutdown (shielded, every
        # wait bounded) still terminates the process tree, and close() waits for it.
        task.cancel()

    # -- tools -------------------------------------------------------------------------------

    def kernel_functions(self) -> dict[str, Callable[..., Any]]:
        """``NAME.tool`` -> host function, for every tool of every server that started."""
        functions: dict[str, Callable[..., Any]] = {}
        for server in self.servers.values():
            for tool in server.tools:
                name = python_name(tool.name)
                functions.setdefault(f"{server.name}.{name}", self._function(server, tool, name))
        return functions

    def json_tools(self) -> list[AgentTool]:
        """The JSON tools of the servers exposed as ``both``: ``NAME__tool``, live ones only.

        Each runs like a user's ``expose="model"`` tool (its result capped, its failure an
        ``error:`` observation), with the server's own input schema.
        """
        made = []
        for server in self.servers.values():
            if server.spec.expose != "both":
                continue
            for tool in server.tools:
                name = python_name(tool.name)
                as_user = UserTool(self._function(server, tool, name), f"{server.name}__{name}",
                                   "model")  # fmt: skip
                made.append(replace(as_user.as_agent_tool(), parameters=dict(tool.input_schema),
                                    available=_serving(server)))  # fmt: skip
        return made

    def describe(self) -> str:
        """What the model needs to know now: each live tool's call, and each server that is down."""
        lines = []
        for server in self.servers.values():
            if server.down is not None:
                lines.append(f"- MCP server {server.name!r} is unavailable: {server.down}")
                continue
            for tool in server.tools:
                doc = (tool.description or "").strip().splitlines()
                call = f"{server.name}.{python_name(tool.name)}{_call_text(tool.input_schema)}"
                lines.append(f"- `{call}`" + (f": {doc[0][:160]}" if doc else ""))
        if not lines:
            return ""
        head = ("MCP tools, callable in your cells as NAME.tool(arg=...) (help(NAME.tool) shows "
                "one); results are dicts or text:")  # fmt: skip
        return "\n".join([head, *lines])

    def call(self, server_name: str, tool: str, arguments: Mapping[str, Any]) -> Any:
        """Call one tool and return its result as a Python object (see the module docstring).

        Raises:
            ToolServerError: the server is down (or goes down now), or the tool answered with
                an error.
        """
        server = self.servers[server_name]
        if server.down is not None or server.client is None:
            raise _gone(server)
        try:
            result = self._portal.call(_request, server, tool, dict(arguments))
        except TimeoutError:
            self._stop(server, f"it did not answer {tool} within {server.spec.timeout:g} s and "
                               "was stopped")  # fmt: skip
            raise _gone(server) from None
        except MCPError as exc:
            if exc.error.code != -32000:  # not CONNECTION_CLOSED: this call was refused
                raise ToolServerError(f"{server.name}.{tool} was refused: {exc.error.message}",
                                      server=server.name, gone=False) from exc  # fmt: skip
            self._stop(server, f"it stopped during {tool}{_tail(server.errlog)}")
            raise _gone(server) from exc
        return _value(server.name, tool, result)

    def _function(self, server: _Server, tool: Tool, name: str) -> Callable[..., Any]:
        def call(**arguments: Any) -> Any:
            return self.call(server.name, tool.name, arguments)

        call.__name__ = name
        call.__qualname__ = f"{server.name}.{name}"
        call.__doc__ = _docstring(server.name, tool)
        call.__signature__ = _signature(tool.input_schema)  # type: ignore[attr-defined]
        return call


def _serving(server: _Server) -> Callable[[], bool]:
    return lambda: server.down is None


def python_name(tool: str) -> str:
    """A tool's name as a Python identifier (``get-time`` -> ``get_time``, ``2fa`` -> ``t_2fa``)."""
    name = re.sub(r"\W", "_", tool)
    if not name or not (name[0].isalpha()):
        name = f"t_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


async def _request(server: _Server, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    client = server.client
    if client is None:
        raise MCPError(code=-32000, message="Connection closed")
    with anyio.fail_after(server.spec.timeout):
        return await client.call_tool(tool, arguments)


@asynccontextmanager
async def _stdio_client(params: StdioServerParameters, errlog: Path) -> AsyncIterator[Client]:
    with errlog.open("a", encoding="utf-8") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            yield client


@asynccontextmanager
async def _http_client(spec: McpServerSpec) -> AsyncIterator[Client]:
    timeout = httpx2.Timeout(spec.timeout + 5.0)
    async with httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout) as http:
        url = str(spec.url)
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def _value(server: str, tool: str, result: CallToolResult) -> Any:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    if result.is_error:
        said = " ".join(" ".join(texts).split())[:2000] or "no message"
        raise ToolServerError(f"{server}.{tool} failed: {said}", server=server, gone=False)
    if result.structured_content is not None:
        return result.structured_content
    others = [block.type for block in result.content if not isinstance(block, TextContent)]
    if others:
        return {"text": "\n".join(texts), "other_content": others}
    return "\n".join(texts)


def _gone(server: _Server) -> ToolServerError:
    return ToolServerError(
        f"the MCP server {server.name!r} ({server.spec.where}) is unavailable: {server.down}; its "
        "tools are withdrawn for the rest of this session",
        server=server.name,
        gone=True,
    )


def _signature(schema: Mapping[str, Any]) -> inspect.Signature:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    params = []
    for name, prop in properties.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            continue  # reachable through **arguments only
        default = inspect.Parameter.empty if name in required else prop.get("default")
        annotation = _type_text(prop)
        params.append(inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=default,
            annotation=annotation if annotation else inspect.Parameter.empty,
        ))  # fmt: skip
    if len(params) < len(properties):
        params.append(inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params)


def _type_text(prop: Mapping[str, Any]) -> str:
    kinds = prop.get("type")
    if isinstance(kinds, str):
        return _JSON_TYPES.get(kinds, "")
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(kinds, list):
        options = [{"type": kind} for kind in kinds]
    if not isinstance(options, list):
        return ""
    shown = [_type_text(option) for option in options if isinstance(option, Mapping)]
    return " | ".join(text for text in shown if text)


def _call_text(schema: Mapping[str, Any]) -> str:
    required = set(schema.get("required") or ())
    names = [name if name in required else f"{name}=" for name in schema.get("properties") or {}]
    return "(" + ", ".join(names) + ")"


def _docstring(server: str, tool: Tool) -> str:
    lines = [(tool.description or f"The {tool.name} tool of the MCP server {server}.").strip()]
    properties = tool.input_schema.get("properties") or {}
    if properties:
        lines += ["", "Args:"]
        for name, prop in properties.items():
            about = str(prop.get("description") or prop.get("title") or "").strip()
            lines.append(f"    {name}: {about}" if about else f"    {name}")
    return "\n".join(lines)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _reason(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return exc.error.message
    return f"{type(exc).__name__}: {exc}"


def _tail(errlog: Path) -> str:
    try:
        text = errlog.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return f"; its stderr ended with: {text[-_TAIL:]!r}" if text else ""
