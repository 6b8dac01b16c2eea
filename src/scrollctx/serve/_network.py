"""Serving on a network: loopback by default, a token for anything else, one listening socket.

Shared by the HTTP doors (``scroll mcp --http``, ``scroll serve``). Security model: an address
that is not loopback is refused unless a token is set (:func:`check_bind`), so nobody serves a
store to the network by accident; with a token, every request must carry it
(:class:`TokenGuard`), compared in constant time, or get 401 before it reaches the door. Without
a token (loopback only), a request must name a loopback host in its ``Host`` header or get 421:
a web page whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot drive the door.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from scrollctx.errors import ConfigError, UsageError

__all__ = ["MIN_TOKEN", "TokenGuard", "check_bind", "is_loopback", "listen"]

MIN_TOKEN = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, token: str | None, *, how: str = "--token") -> None:
    """Refuse a non-loopback address without a token, and a token too short to be one."""
    if token is not None and len(token) < MIN_TOKEN:
        raise ConfigError(
            f"the token has {len(token)} characters; use at least {MIN_TOKEN}, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve {host} without a token: anyone who can reach it could read the "
            f"store. Pass {how}, or bind 127.0.0.1"
        )


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: any free port), answers sent at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: an answer's headers and body go out in two writes, and
    # without it the body waits for the client's delayed ACK (about 40 ms every request).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    listener.listen(128)
    return listener


class TokenGuard:
    """ASGI middleware: with a token, a request without it gets 401 and goes no further;
    without one, a request whose ``Host`` is not loopback gets 421 (DNS rebinding).

    The token is accepted as ``Authorization: Bearer <token>`` and, for clients that send
    their key that way (the Anthropic SDK), as any of ``also`` headers (``x-api-key``).
    """

    def __init__(self, app: ASGIApp, token: str | None, also: Iterable[str] = ()) -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.also = tuple(name.lower().encode() for name in also)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif self.expected is None and not _names_loopback(scope):
            await _refuse(send, 421, "this server answers loopback host names only")
        elif self.expected is None or self._allowed(scope, self.expected):
            await self.app(scope, receive, send)
        else:
            await _refuse(send, 401, "unauthorized: send Authorization: Bearer <token>")

    def _allowed(self, scope: Scope, expected: bytes) -> bool:
        headers = dict(scope.get("headers") or [])
        if hmac.compare_digest(headers.get(b"authorization", b""), b"Bearer " + expected):
            return True
        return any(hmac.compare_digest(headers.get(name, b""), expected) for name in self.also)


def _names_loopback(scope: Scope) -> bool:
    """Whether the request's ``Host`` header names this machine (its port aside)."""
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    return is_loopback(name)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
