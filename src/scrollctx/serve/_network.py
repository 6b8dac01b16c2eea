"""Serving on a network: loopback by default, a token for anything else, one listening socket.

Shared by the three HTTP doors (``scroll serve``, ``scroll mcp --http``, ``scroll ui``), with one
rule. An address that is not loopback is refused unless a token of at least
:data:`MIN_TOKEN` characters is set (:func:`check_bind`), so nobody serves a store to the
network by accident. :class:`TokenGuard` then checks every request before it reaches the door:

- a request from a web page of another site (an ``Origin`` that is neither its ``Host`` nor a
  loopback origin, as the MCP SDK allows) gets 403: a page open in the user's browser cannot
  make the browser call the door (a ``text/plain`` POST needs no CORS preflight, and the proxy
  would log it and spend the upstream key). The SDKs and other programs send no ``Origin``;
- with a token, a request that does not carry it gets 401 (compared in constant time);
- without one (loopback only), a request must name a loopback host in its ``Host`` header or
  get 421: a web page whose name an attacker points at 127.0.0.1 (DNS rebinding) cannot drive
  the door.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, urlsplit

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
    """A socket listening on ``host:port`` (port 0: any free port), answers sent at once.

    IPv6 for an address with a colon, else IPv4 (``localhost`` included): uvicorn's own rule.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: an answer's headers and body go out in two writes, and
    # without it the body waits for the client's delayed ACK (about 40 ms every request).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        listener.bind((host.strip("[]"), port))
    except OSError as exc:
        listener.close()
        hint = "" if isinstance(exc, socket.gaierror) else "; choose another --port (0: any)"
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from exc
    listener.listen(128)
    return listener


class TokenGuard:
    """ASGI middleware: the checks of the module docstring, before the request reaches ``app``.

    The token is accepted as ``Authorization: Bearer <token>``; for clients that send their key
    another way, also as any of the ``also`` headers (``x-api-key``: the Anthropic SDK), and for
    a browser as the ``cookie`` named so or the ``query`` parameter (the inspector's printed
    URL).
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        also: Iterable[str] = (),
        *,
        cookie: str | None = None,
        query: str | None = None,
    ) -> None:
        self.app = app
        self.expected = token.encode() if token else None
        self.also = tuple(name.lower().encode() for name in also)
        self.cookie, self.query = cookie, query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif not _same_origin(scope):
            await _refuse(send, 403, "this server does not answer web pages of other sites")
        elif self.expected is None and not _names_loopback(scope):
            await _refuse(send, 421, "this server answers loopback host names only")
        elif self.expected is None or self._allowed(scope, self.expected):
            await self.app(scope, receive, send)
        else:
            await _refuse(send, 401, "unauthorized: send Authorization: Bearer <token>")

    def _allowed(self, scope: Scope, expected: bytes) -> bool:
        headers = dict(scope.get("headers") or [])
        given = [headers.get(b"authorization", b"").removeprefix(b"Bearer ")]
        given += [headers.get(name, b"") for name in self.also]
        if self.cookie is not None:
            given.append(_cookie(headers.get(b"cookie", b""), self.cookie))
        if self.query is not None:
            given += parse_qs(scope.get("query_string", b"")).get(self.query.encode(), [])
        # Every carrier is compared, so the time taken does not say which one came close.
        return sum(hmac.compare_digest(value, expected) for value in given) > 0


def _cookie(header: bytes, name: str) -> bytes:
    try:
        morsel = SimpleCookie(header.decode("latin-1")).get(name)
    except CookieError:
        return b""
    return morsel.value.encode("latin-1", "replace") if morsel is not None else b""


def _names_loopback(scope: Scope) -> bool:
    """Whether the request's ``Host`` header names this machine (its port aside)."""
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
    return is_loopback(_host_name(host).lower())


def _host_name(host: str) -> str:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), or
    ``""`` if the header is not one of those."""
    if host.startswith("["):
        name, bracket, port = host[1:].partition("]")
        port = port.removeprefix(":") if bracket else "x"
    else:
        name, _, port = host.partition(":")
    return name if port.isdigit() or port == "" else ""


def _same_origin(scope: Scope) -> bool:
    """Whether the request comes from no web page (no ``Origin``), from a page of the site it
    was sent to, or from a page served by this machine (as the MCP SDK allows)."""
    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin")
    if origin is None:
        return True
    try:
        site = urlsplit(origin.decode("latin-1"))
        name = site.hostname or ""
    except ValueError:  # no URL at all
        return False
    host = headers.get(b"host", b"").decode("latin-1").lower()
    return site.netloc.lower() == host or is_loopback(name)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
