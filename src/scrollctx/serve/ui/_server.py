"""Run the inspector: check the bind, then serve it with uvicorn until interrupted.

Loopback (127.0.0.1, ::1, localhost) is the default and may run without a token; any other
address needs one (the rule of every HTTP door, :func:`~scrollctx.serve._network.check_bind`),
and the check happens before a socket is opened. The token is the user's secret: it travels in
the printed URL once, then as a cookie.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scrollctx.errors import MissingDependency
from scrollctx.serve._network import check_bind, listen

__all__ = ["UIServer"]


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
            ConfigError: a non-loopback host without a token, or a token too short.
            UsageError: an address that cannot be bound (a port in use, a host name that
                does not resolve).
            MissingDependency: the ``ui`` extra is not installed.
            StoreError: there is no store at ``db_path``.
        """
        check_bind(self.host, self.token, how="--token (or SCROLL_UI_TOKEN)")
        try:
            import uvicorn

            from scrollctx.serve.ui._app import create_app
        except ImportError as exc:
            raise MissingDependency("starlette, jinja2 and uvicorn (the inspector)", "ui") from exc
        listening = listen(self.host, self.port)
        try:
            app = create_app(self.db_path, token=self.token, results_dir=self.results_dir)
        except BaseException:
            listening.close()
            raise
        announce(self.url(listening.getsockname()[1]))
        config = uvicorn.Config(app, log_level="warning", server_header=False, proxy_headers=False)
        uvicorn.Server(config).run(sockets=[listening])
