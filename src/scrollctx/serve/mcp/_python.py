"""``scroll_python``: the paper's ``recall_history_python`` for any MCP client.

A cell runs in a persistent sandboxed kernel with ``ms`` bound (the same
:class:`~scrollctx.kernel.Kernel`, sandbox policy and observation as Scroll's own agent); only
what it prints comes back. Which kernel, by transport (MCP 2026-07-28 removed protocol
sessions; the handshake era still has them):

- stdio: the connection is the session (one client per server process): one kernel;
- HTTP, handshake era: the ``Mcp-Session-Id`` session: one kernel, closed when the client ends
  the session (``DELETE``, see :mod:`._http`);
- HTTP, 2026-07-28: no protocol session, so the first call mints a handle, returned as
  ``session``; passing it back reaches the same kernel (a state handle, SEP-2567).

Every kernel also ends when idle for the server's idle timeout and when the server stops
(:class:`~scrollctx.serve.KernelRegistry`). A cancelled call (the client cancelled it, or went
away) interrupts the cell over stdio, where the connection shows whether the client is still
there; over HTTP it stops the kernel, since closing the response is both how a 2026-07-28
client cancels and how it leaves, and a kernel nobody returns to must not keep a worker.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from scrollctx.kernel import CellResult, render_digest, render_observation
from scrollctx.serve.mcp._tools import tool_result

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from scrollctx.serve.mcp._server import Door

__all__ = ["register_python_tool"]

_CANCELLED = "its client cancelled or went away while a cell was running"


def register_python_tool(server: MCPServer[Any], door: Door) -> None:
    """Add ``scroll_python`` to ``server``."""
    limit = door.options.cell_timeout

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def scroll_python(
        source: Annotated[str, Field(min_length=1, description="The Python cell to run.")],
        timeout: Annotated[
            float | None,
            Field(gt=0, description="Seconds the cell may run; the server's limit caps it."),
        ] = None,
        session: Annotated[
            str | None,
            Field(description="The `session` an earlier result returned, to reach its kernel."),
        ] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Run a Python cell in your persistent sandboxed kernel, with your history bound as `ms`.

        Variables persist across calls, so search once, keep rows in variables, and filter
        them in later cells; only what the cell prints comes back (output is capped: print
        counts, slices, summaries). `ms`: ms.search(query, k=10, kind=, role=, session_id=,
        seq_range=(lo, hi), created_from=, created_to=) -> hits with seq, role, date,
        snippet, content; ms.expand(seqs) or ms.expand(lo, hi) -> whole events;
        ms.sql_query(sql, params) -> rows of hist.conversation_history (read-only, at most
        1000); ms.sessions(); ms.session(id); ms.index(session_id); ms.days_between(d1, d2);
        print(ms.help()) for the rest. The kernel is sandboxed (no network, no writes
        outside its scratch folder, no processes). If the result names a `session`, pass it
        back to keep your variables.
        Example: scroll_python(source="hits = ms.search('sprint target', k=10)\\n
        for h in hits: print(h['seq'], h['snippet'][:120])")
        """
        if session is not None:
            key, minted = session, True
        else:
            key, minted = await anyio.to_thread.run_sync(door.session_key, _http_session(ctx))
        seconds = limit if timeout is None else min(timeout, limit)
        run = functools.partial(
            door.kernels.run_cell, key, source, timeout=seconds, create=not minted
        )
        try:
            result = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_on_cancel, door, key)
            raise
        capped = timeout is not None and timeout > limit
        return _python_result(result, key if minted else None, limit if capped else None)


def _http_session(ctx: Context | None) -> str | None:
    """The handshake-era HTTP session id of this request (None on stdio and 2026-07-28)."""
    if ctx is None or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    headers = ctx.headers or {}
    return headers.get("mcp-session-id")


def _on_cancel(door: Door, key: str) -> None:
    if door.options.transport == "stdio":
        door.kernels.interrupt(key)
    else:
        door.kernels.close(key, _CANCELLED)


def _python_result(result: CellResult, session: str | None, capped: float | None) -> CallToolResult:
    text = render_observation(result)
    if capped is not None:
        text += f"\n[note] timeout lowered to the server's limit of {capped:g} s"
    if result.digest:
        text += "\nvariables:\n" + render_digest(result.digest, result.digest_more)
    if session is not None:
        text += f'\n[session] pass session="{session}" to keep using this kernel'
    data = {
        "ok": result.ok,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": result.error,
        "notes": list(result.notes),
        "namespace_lost": result.namespace_lost,
        "timed_out": result.timed_out,
        "refused": result.refused,
        "sandbox": result.sandbox.profile if result.sandbox else None,
        "variables": [entry.render() for entry in result.digest],
        "session": session,
    }
    return tool_result(text, data, error=not result.ok)
