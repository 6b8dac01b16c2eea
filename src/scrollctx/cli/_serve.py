"""``scroll serve``: a context-managing proxy in front of an OpenAI- or Anthropic-compatible API.

The upstream is ``--upstream URL`` (the API's base URL: ``https://api.openai.com/v1``,
``http://127.0.0.1:8000/v1``, ``https://api.anthropic.com``); its API is ``--upstream-api``
(default: ``anthropic`` for an anthropic.com host, else ``openai``). Its key comes from
``--upstream-key``, else the usual variable (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``) or
``[backends.NAME]`` in ``<store>/config.toml``; the clients' own keys are never sent upstream.

It listens on loopback (``--host 127.0.0.1``, ``--port 8787``); any other address needs a token
(``--token`` / ``SCROLL_SERVE_TOKEN`` or ``--token-file``), which every request must then carry
as its API key. The recall kernel's sandbox is checked first: ``strict`` refuses to start where
a layer is missing, ``--sandbox best-effort`` or ``off`` opts out (logged, and stated in every
answer's ``X-Scroll-Sandbox`` header). Messages go to stderr; stdout stays empty.
"""

from __future__ import annotations

from urllib.parse import urlparse

import click

from scrollctx.agent.backends import Backend
from scrollctx.cli._app import (
    Bounded,
    kernel_pool_options,
    sandbox_options,
    store_option,
    token_options,
    warn,
)
from scrollctx.cli._models import ModelCall
from scrollctx.config import Config
from scrollctx.errors import MissingDependency
from scrollctx.kernel import SandboxPolicy

__all__ = ["serve_command"]

_APIS = ("openai", "anthropic")


@click.command(name="serve")
@click.option(
    "--upstream",
    required=True,
    metavar="URL",
    help="Base URL of the real API (e.g. https://api.openai.com/v1).",
)
@click.option(
    "--upstream-api",
    type=click.Choice(_APIS),
    default=None,
    help="The API the upstream speaks (default: anthropic for anthropic.com, else openai).",
)
@click.option(
    "--upstream-key",
    envvar="SCROLL_UPSTREAM_KEY",
    metavar="KEY",
    help="The upstream's key (env SCROLL_UPSTREAM_KEY; else OPENAI_API_KEY / "
    "ANTHROPIC_API_KEY or config.toml).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8787,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option(
    "--budget-tokens",
    type=click.IntRange(min=1024),
    default=None,
    metavar="N",
    help="The working view's window C for every model (default: each requested model's, "
    "else 32000).",
)
@click.option(
    "--rho",
    type=Bounded(0, 1, min_open=True),
    default=0.8,
    show_default=True,
    help="Evict when the view exceeds rho * C.",
)
@click.option(
    "--max-recall-steps",
    type=click.IntRange(min=1),
    default=6,
    show_default=True,
    help="Upstream calls one request may make (recall steps included).",
)
@click.option(
    "--recall-seconds",
    type=Bounded(min=1),
    default=40.0,
    show_default=True,
    help="No recall step starts after this many seconds.",
)
@click.option(
    "--cell-timeout",
    type=Bounded(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds one recall cell may run.",
)
@click.option(
    "--timeout",
    type=Bounded(min=0, min_open=True),
    default=120.0,
    show_default=True,
    help="Seconds one upstream request may take.",
)
@click.option(
    "--upstream-retries",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Retries of an upstream 429/5xx before the client gets it.",
)
@click.option(
    "--session-key",
    type=click.Choice(("header", "api-key")),
    default="header",
    show_default=True,
    help="api-key: the client's key also separates sessions.",
)
@click.option(
    "--max-body-mb",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="The largest request body read, in MiB (413 past it).",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Requests served at once (503 with Retry-After past it).",
)
@click.option(
    "--body-seconds",
    type=Bounded(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds a request body may take to arrive whole (408 past it).",
)
@kernel_pool_options("conversation")
@sandbox_options("Recall kernel")
@token_options("SCROLL_SERVE_TOKEN")
@store_option
def serve_command(
    upstream: str,
    upstream_api: str | None,
    upstream_key: str | None,
    host: str,
    port: int,
    token: str | None,
    budget_tokens: int | None,
    rho: float,
    max_recall_steps: int,
    recall_seconds: float,
    cell_timeout: float,
    timeout: float,
    upstream_retries: int,
    session_key: str,
    max_body_mb: int,
    max_requests: int,
    body_seconds: float,
    idle_timeout: float,
    max_kernels: int,
    sandbox: SandboxPolicy,
    config: Config,
) -> None:  # fmt: skip
    """Serve an OpenAI/Anthropic-compatible API that keeps its clients' context bounded.

    Example: scroll serve --upstream https://api.openai.com/v1 --port 8787
    """
    try:
        from scrollctx.serve.proxy import RecallLimits, ServeOptions, ViewSettings, serve_proxy
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("starlette", "uvicorn", "anyio", "orjson"):
            raise
        raise MissingDependency("starlette, uvicorn and orjson", "serve") from exc
    api = upstream_api or _guess_api(upstream)
    backend = _upstream(api, upstream, upstream_key, timeout, upstream_retries, config)
    options = ServeOptions(
        view=ViewSettings(budget_tokens, rho=rho),
        limits=RecallLimits(max_recall_steps, recall_seconds, cell_timeout),
        sandbox=sandbox,
        host=host,
        port=port,
        token=token,
        session_key=session_key,
        max_body=max_body_mb * 1024 * 1024,
        max_requests=max_requests,
        body_seconds=body_seconds,
        idle_timeout=idle_timeout,
        max_kernels=max_kernels,
    )
    from scrollctx.agent._windows import DEFAULT_BUDGET

    budget = (f"budget {budget_tokens:,} tokens from --budget-tokens" if budget_tokens
              else "budget per requested model: its window from the upstream's /v1/models, "
                   f"else the model table, else {DEFAULT_BUDGET:,} tokens")  # fmt: skip

    def ready(url: str, label: str) -> None:
        base = f"{url}/v1" if api == "openai" else url
        warn(f"scroll serve: {api} upstream {upstream}; point clients at {base} "
             f"(sandbox {label}, {budget}); Ctrl-C stops")  # fmt: skip

    serve_proxy(config, backend, options, on_ready=ready)


def _guess_api(url: str) -> str:
    host = urlparse(url).hostname or ""
    return "anthropic" if host == "anthropic.com" or host.endswith(".anthropic.com") else "openai"


def _upstream(
    api: str, url: str, key: str | None, timeout: float, retries: int, config: Config
) -> Backend:
    from scrollctx.agent import RetryPolicy, resolve_model

    call = ModelCall(model=api, base_url=url, api_key=key, timeout=timeout)
    backend = resolve_model(api, config=config, environ=call.environ(),
                            options=call.backend_options())  # fmt: skip
    backend.retry = RetryPolicy(max_attempts=1 + retries)
    return backend
