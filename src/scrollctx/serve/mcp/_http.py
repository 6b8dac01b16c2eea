"""Streamable HTTP for ``scroll mcp --http``: the SDK's app behind a token guard, on uvicorn.

Security model:

- loopback by default; an address that is not loopback is refused unless a bearer token is
  set (:func:`~scrollctx.serve._network.check_bind`), so nobody serves a store to the network
  by accident;
- with a token, every request (POST, GET, DELETE, any path) must carry
  ``Authorization: Bearer <token>``; the comparison takes constant time, and a missing or
  wrong token gets ``401`` before the request reaches the SDK
  (:class:`~scrollctx.serve._network.TokenGuard`);
- on loopback the SDK also checks ``Host`` and ``Origin`` (DNS-rebinding protection), so a web
  page in a local browser cannot talk to the server;
- a client that ends its handshake-era session (``DELETE`` answered 2xx) gets its kernel
  stopped at once (:meth:`Door.end_http_session`); 2026-07-28 clients hold kernel handles
  instead (see :mod:`._python`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scrollctx.errors import UsageError
from scrollctx.serve._network import TokenGuard, check_bind, listen
from scrollctx.serve.mcp._server import Door, ServerOptions, build_server

__all__ = ["SessionEnd", "parse_address", "serve_http"]

_PATH = "/mcp"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port (0: any free port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765; got {text!r}")
    return host, int(port)


class SessionEnd:
    """ASGI middleware: ending a kernel with its handshake-era HTTP session."""

    def __init__(self, app: ASGIApp, on_session_end: Callable[[str], None]) -> None:
        self.app = app
        self.on_session_end = on_session_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        session = headers.get(b"mcp-session-id", b"").decode("latin-1")
        if scope["type"] != "http" or scope["method"] != "DELETE" or not session:
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, watch)
        if status and 200 <= status[0] < 300:
            await anyio.to_thread.run_sync(self.on_session_end, session)


def serve_http(
    options: ServerOptions,
    host: str,
    port: int,
    token: str | None,
    *,
    on_ready: Callable[[str], None] = lambda url: None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted; stop every kernel.

    ``on_ready(url)`` is called once the socket listens (port 0 picks a free port; the URL
    names it), before the first request is taken.
    """
    check_bind(host, token, how="--token-file FILE (or --token / SCROLL_MCP_TOKEN)")
    door = Door(options)
    door.open()
    try:
        server = build_server(door)
        sdk_app = server.streamable_http_app(streamable_http_path=_PATH, host=host)
        app: Any = TokenGuard(SessionEnd(sdk_app, door.end_http_session), token)
        listener = listen(host, port)
        shown = f"[{host}]" if ":" in host else host
        on_ready(f"http://{shown}:{listener.getsockname()[1]}{_PATH}")
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        door.close()
