"""Streamable HTTP for ``scroll mcp --http``: the SDK's app behind a token guard, on uvicorn.

Security model:

- loopback by default; an address that is not loopback is refused unless a bearer token is
  set (:func:`check_bind`), so nobody serves a store to the network by accident;
- with a token, every request (POST, GET, DELETE, any path) must carry
  ``Authorization: Bearer <token>``; the comparison takes constant time, and a missing or
  wrong token gets ``401`` before the request reaches the SDK;
- on loopback the SDK also checks ``Host`` and ``Origin`` (DNS-rebinding protection), so a web
  page in a local browser cannot talk to the server;
- a client that ends its handshake-era session (``DELETE`` answered 2xx) gets its kernel
  stopped at once (:meth:`Door.end_http_session`); 2026-07-28 clients hold kernel handles
  instead (see :mod:`._python`).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scrollctx.errors import ConfigError, UsageError
from scrollctx.serve.mcp._server import Door, ServerOptions, build_server

__all__ = ["BearerGuard", "check_bind", "parse_address", "serve_http"]

MIN_TOKEN = 16
_PATH = "/mcp"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port (0: any free port)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http takes HOST:PORT, e.g. 127.0.0.1:8765; got {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback address without a token, and a token too short to be one."""
    if token is not None and len(token) < MIN_TOKEN:
        raise ConfigError(
            f"the token has {len(token)} characters; use at least {MIN_TOKEN}, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve {host} without a token: anyone who can reach it could read the "
            "store. Pass --token-file FILE (or --token / SCROLL_MCP_TOKEN), or bind 127.0.0.1"
        )


class BearerGuard:
    """ASGI middleware: the token check, and ending a kernel with its HTTP session."""

    def __init__(
        self, app: ASGIApp, token: str | None, on_session_end: Callable[[str], None]
    ) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.on_session_end = on_session_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.expected is not None and not hmac.compare_digest(
            headers.get(b"authorization", b""), self.expected
        ):
            await _refuse(send)
            return
        session = headers.get(b"mcp-session-id", b"").decode("latin-1")
        if scope["method"] != "DELETE" or not session:
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


async def _refuse(send: Send) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
        (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


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
    check_bind(host, token)
    door = Door(options)
    door.open()
    try:
        server = build_server(door)
        app: Any = BearerGuard(
            server.streamable_http_app(streamable_http_path=_PATH, host=host),
            token,
            door.end_http_session,
        )
        listener = _listen(host, port)
        shown = f"[{host}]" if ":" in host else host
        on_ready(f"http://{shown}:{listener.getsockname()[1]}{_PATH}")
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        door.close()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    listener.listen(128)
    return listener
