"""Run the inspector: check the bind, then serve it with uvicorn until interrupted.

Loopback (127.0.0.1, ::1, localhost) is the default and may run without a token; any other
address needs one, and the check happens before a socket is opened. The token is the user's
secret: it travels in the printed URL once, then as a cookie.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scrollctx.errors import MissingDependency, UsageError
from scrollctx.serve._network import is_loopback

__all__ = ["UIServer", "check_bind", "is_loopback", "new_token"]


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token.

    Raises:
        UsageError: ``host`` is reachable from other machines and no token was given.
    """
    if not is_loopback(host) and not token:
        raise UsageError(
            f"--host {host} is reachable from other machines: the inspector shows your whole "
            "history, so it needs --token (or SCROLL_UI_TOKEN) there; for example "
            f"--token {new_token()}"
        )


def new_token() -> str:
    """A fresh random token (URL-safe)."""
    return secrets.token_urlsafe(24)


@dataclass(frozen=True, slots=True)
class UIServer:
    """The inspector of one store, bound to ``host:port`` (port 0: the OS picks one)."""

    db_path: Path
    host: str = "127.0.0.1"
    port: int = 8766
    token: str | None = None
    results_dir: Path | None = None

    def url(self, port: int | None = None) -> str:
        """The address to open (with the token, when there is one)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"/?token={self.token}" if self.token else "/"
        return f"http://{host}:{port or self.port}{query}"

    def run(self, announce: Callable[[str], None] = lambda url: None) -> None:
        """Serve until interrupted (Ctrl-C or SIGTERM stop it cleanly).

        ``announce`` is given the address to open once the port is bound (the port the OS
        picked, for port 0).

        Raises:
            UsageError: a non-loopback host without a token, or an address that cannot be
                bound (a port in use, a host name that does not resolve).
            MissingDependency: the ``ui`` extra is not installed.
            StoreError: there is no store at ``db_path``.
        """
        check_bind(self.host, self.token)
        try:
            import uvicorn

            from scrollctx.serve.ui._app import create_app
        except ImportError as exc:
            raise MissingDependency("starlette, jinja2 and uvicorn (the inspector)", "ui") from exc
        listening = _listen(self.host, self.port)
        try:
            app = create_app(self.db_path, token=self.token, results_dir=self.results_dir)
        except BaseException:
            listening.close()
            raise
        announce(self.url(listening.getsockname()[1]))
        config = uvicorn.Config(app, log_level="warning", server_header=False, proxy_headers=False)
        uvicorn.Server(config).run(sockets=[listening])


def _listen(host: str, port: int) -> socket.socket:
    """Bind ``host:port`` here: a port in use is this command's error, not uvicorn's exit 3."""
    # uvicorn's own rule: IPv6 for an address with a colon, else IPv4 (``localhost`` included).
    listening = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host.strip("[]"), port))
    except OSError as exc:
        listening.close()
        hint = "" if isinstance(exc, socket.gaierror) else "; choose another --port (0: any)"
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from exc
    return listening
