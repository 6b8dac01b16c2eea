"""Running ``scroll serve``: check the bind and the sandbox, open everything, serve, close it all.

Order matters for "failure is visible": the address (loopback, or a token) and the sandbox are
checked before the store is opened or a socket listens, so a proxy that would serve unsafely
never starts; once serving, shutdown (Ctrl-C, SIGTERM) stops every kernel and closes the
upstream client and the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from scrollctx.agent.backends import Backend
from scrollctx.config import Config
from scrollctx.kernel import SandboxPolicy
from scrollctx.log import open_store
from scrollctx.serve._network import check_bind, listen
from scrollctx.serve.proxy._app import BODY_SECONDS, MAX_BODY, MAX_REQUESTS, build_app
from scrollctx.serve.proxy._conversations import ViewSettings
from scrollctx.serve.proxy._proxy import Proxy, sandbox_label
from scrollctx.serve.proxy._recall import RecallLimits

__all__ = ["ServeOptions", "serve_proxy"]


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Where and how ``scroll serve`` listens, and what it does per request."""

    view: ViewSettings
    limits: RecallLimits
    sandbox: SandboxPolicy
    host: str = "127.0.0.1"
    port: int = 8787
    token: str | None = None
    session_key: str = "header"
    max_body: int = MAX_BODY
    max_requests: int = MAX_REQUESTS
    body_seconds: float = BODY_SECONDS
    idle_timeout: float = 900.0
    max_kernels: int = 8


def serve_proxy(
    config: Config,
    backend: Backend,
    options: ServeOptions,
    *,
    on_ready: Callable[[str, str], None] = lambda url, sandbox: None,
) -> None:
    """Serve until interrupted; ``on_ready(url, sandbox)`` once the socket listens.

    The store is the one ``config`` names: a folder's SQLite Event Log, or a shared
    ``postgresql://`` one (``ms`` in the recall kernels reads its local replica, brought up to
    date before each cell). The backend is closed on the way out, whatever happens.

    Raises:
        ConfigError: a non-loopback address without a token.
        SandboxUnavailable: the sandbox does not hold and was not opted out of.
    """
    try:
        how = "--token-file FILE (or --token / SCROLL_SERVE_TOKEN)"
        check_bind(options.host, options.token, how=how)
        label = sandbox_label(options.sandbox)
    except BaseException:
        backend.close()
        raise
    log = open_store(config)
    try:
        proxy = Proxy(log, backend, view=options.view, limits=options.limits,
                      sandbox=options.sandbox, label=label, session_key=options.session_key,
                      idle_timeout=options.idle_timeout,
                      max_kernels=options.max_kernels)  # fmt: skip
    except BaseException:
        backend.close()
        log.close()
        raise
    try:
        listener = listen(options.host, options.port)
        shown = f"[{options.host}]" if ":" in options.host else options.host
        on_ready(f"http://{shown}:{listener.getsockname()[1]}", label)
        app = build_app(proxy, token=options.token, max_body=options.max_body,
                        max_requests=options.max_requests,
                        body_seconds=options.body_seconds)  # fmt: skip
        served = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        uvicorn.Server(served).run(sockets=[listener])
    finally:
        proxy.close()
        log.close()
