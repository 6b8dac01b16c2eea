"""``scroll mcp``: Scroll's memory and recall kernel for any MCP client (extra ``mcp``).

Tools: ``scroll_search``, ``scroll_expand``, ``scroll_sql``, ``scroll_sessions``,
``scroll_index``, ``scroll_python`` (a persistent sandboxed kernel per client session),
``scroll_append`` and ``scroll_ingest`` (not offered when read-only). Resources:
``scroll://sessions``, ``scroll://session/{id}``, ``scroll://event/{seq}``,
``scroll://index/{session}``. Prompt: ``scroll_recall_rules``. Transports: stdio
(:func:`serve_stdio`) and streamable HTTP (:func:`serve_http`), built on the official SDK.
"""

from __future__ import annotations

import anyio

from scrollctx.serve.mcp._http import parse_address, serve_http
from scrollctx.serve.mcp._server import Door, ScrollServer, ServerOptions, build_server

__all__ = [
    "Door",
    "ScrollServer",
    "ServerOptions",
    "build_server",
    "parse_address",
    "serve_http",
    "serve_stdio",
]


def serve_stdio(options: ServerOptions) -> None:
    """Serve one client over stdin/stdout until it closes them; then stop every kernel."""
    door = Door(options)
    door.open()
    try:
        anyio.run(build_server(door).run_stdio_async)
    finally:
        door.close()
