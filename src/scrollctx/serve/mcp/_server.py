"""The MCP server: one store, its tools, resources and prompt, on the official ``mcp`` SDK.

:class:`Door` holds what every tool reaches (the options, the store's :class:`Memory`, the
:class:`~scrollctx.serve.KernelRegistry` of ``scroll_python``); :func:`build_server` registers
the tools on an :class:`mcp.server.mcpserver.MCPServer`. The SDK speaks the protocol (both
eras: the 2025 handshake and 2026-07-28); nothing here parses a message.

Errors, decided in one place (:class:`ScrollServer`): a bad argument is a tool error naming the
argument and what it must be, in one line; a scrollctx error raised by a tool (a query that
cannot run, an unknown kernel handle, a write on a read-only server) is a tool error with its
one-line message; a damaged store is reported as such, with the command that lists every
damaged seq, and nothing is repaired. Anything else is the SDK's generic "Error executing tool"
(the traceback goes to the server's log, never to the client).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedResourceError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import AnyUrl, ValidationError

from scrollctx.config import Config
from scrollctx.errors import IntegrityError, PayloadMissing, ScrollError
from scrollctx.kernel import Kernel, SandboxPolicy
from scrollctx.serve._sessions import KernelRegistry
from scrollctx.serve.mcp._memory import MCP_OPT_OUT, Memory
from scrollctx.serve.mcp._python import register_python_tool
from scrollctx.serve.mcp._resources import package_text, register_resources
from scrollctx.serve.mcp._tools import WRITE_TOOLS, register_memory_tools

__all__ = ["Door", "ScrollServer", "ServerOptions", "build_server"]

Transport = Literal["stdio", "http"]


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How ``scroll mcp`` serves one store (every field has its flag; see ``scroll mcp -h``)."""

    config: Config
    transport: Transport = "stdio"
    read_only: bool = False
    ingest_dirs: tuple[Path, ...] = ()
    sandbox: str | SandboxPolicy = "strict"
    cell_timeout: float = 60.0
    idle_timeout: float = 900.0
    max_kernels: int = 8


class Door:
    """What the tools reach: the options, the store, and the kernels of ``scroll_python``."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.stdio_key = f"stdio-{secrets.token_hex(8)}"
        """The one session of a stdio server (each server process is a new client session)."""
        self.read_only = options.read_only
        self.memory = Memory(
            options.config, read_only=options.read_only, ingest_dirs=options.ingest_dirs,
            sandbox=options.sandbox,
        )  # fmt: skip
        self.kernels = KernelRegistry(
            self._kernel, "mcp", idle_timeout=options.idle_timeout,
            max_kernels=options.max_kernels,
        )  # fmt: skip

    def open(self) -> None:
        """Open the store (see :meth:`Memory.open`) and start expiring idle kernels."""
        self.memory.open()
        self.kernels.start_reaper()

    def close(self) -> None:
        """Stop every kernel (no worker is left when this returns), then close the store."""
        self.kernels.close_all()
        self.memory.close()

    def session_key(self, http_session: str | None) -> tuple[str, bool]:
        """The kernel of a call that names none: ``(key, minted)`` (see :mod:`._python`)."""
        if self.options.transport == "stdio":
            return self.stdio_key, False
        if http_session:
            return f"http-session:{http_session}", False
        return self.kernels.mint(), True

    def end_http_session(self, http_session: str) -> None:
        """The client ended its handshake-era HTTP session: stop its kernel."""
        self.kernels.close(f"http-session:{http_session}", "its client ended the MCP session")

    def _kernel(self, name: str) -> Kernel:
        return Kernel(
            self.options.config.db_path,
            event_log=self.memory.log,
            session_id=name,
            sandbox=self.options.sandbox,
            timeout=self.options.cell_timeout,
            opt_out=MCP_OPT_OUT,
        )


class ScrollServer(MCPServer[Any]):
    """The SDK's server with scrollctx's error contract (see the module docstring)."""

    def __init__(self, door: Door, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.door = door
        self._arguments: dict[str, list[str]] | None = None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name in WRITE_TOOLS and self.door.read_only:
            raise ToolError(f"{name} is refused: this server is read-only (--read-only)")
        await self._refuse_unknown(name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(argument_error(name, cause)) from cause
            if isinstance(cause, ScrollError):
                raise ToolError(f"{name}: {one_line(cause)}") from cause
            raise

    async def _refuse_unknown(self, name: str, arguments: dict[str, Any]) -> None:
        """An argument the tool does not take is a bad argument (the SDK's validation ignores
        it: a misspelt filter such as ``seq_range`` left the search unfiltered, unsaid)."""
        if self._arguments is None:
            tools = await self.list_tools()
            self._arguments = {t.name: sorted(t.input_schema.get("properties", {})) for t in tools}
        known = self._arguments.get(name)
        unknown = sorted(set(arguments) - set(known or ()))
        if known is not None and unknown:
            raise ToolError(
                f"{name}: bad arguments -- {', '.join(unknown)}: not an argument of {name} "
                f"(it takes {', '.join(known)}); see the tool's input schema"
            )

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().read_resource(uri, context)
        except UnexpectedResourceError as exc:
            if isinstance(exc.__cause__, ScrollError):
                raise ResourceError(f"{uri}: {one_line(exc.__cause__)}") from exc.__cause__
            raise


def one_line(error: ScrollError) -> str:
    """The error as one line for a model; a damaged store says so and names the check."""
    text = " ".join(str(error).split())
    if isinstance(error, IntegrityError | PayloadMissing):
        return (
            f"the store is damaged: {text}. Nothing was repaired; the operator can list every "
            "damaged seq with `scroll doctor`"
        )
    return text


def argument_error(tool: str, error: ValidationError) -> str:
    """A validation failure as one line: each bad argument and what it must be."""
    parts: dict[str, str] = {}
    for item in error.errors():
        where = str(item["loc"][0]) if item["loc"] else "arguments"
        if where not in parts:
            shown = repr(item.get("input"))
            shown = shown if len(shown) <= 60 else shown[:60] + "…"
            got = f" (got {shown})" if where != "arguments" else ""
            parts[where] = f"{where}: {item['msg']}{got}"
    return f"{tool}: bad arguments -- {'; '.join(parts.values())}; see the tool's input schema"


def build_server(door: Door) -> ScrollServer:
    """The MCP server over ``door`` (tools, resources, prompt); run it with a transport."""
    logging.getLogger("mcp").setLevel(logging.WARNING)
    server = ScrollServer(
        door,
        name="scroll",
        title="Scroll: lossless agent memory",
        instructions=package_text("instructions.md"),
        version=version("scrollctx"),
        log_level="WARNING",
    )
    register_memory_tools(server, door)
    register_python_tool(server, door)
    register_resources(server, door)
    return server
