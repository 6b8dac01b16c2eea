"""``scroll mcp``: serve a store to MCP clients (Claude Code, Codex, Cursor, any SDK client).

Over stdio by default (the client starts the command); ``--http HOST:PORT`` serves streamable
HTTP instead, on loopback unless told otherwise, and any other address requires a token
(``--token`` / ``SCROLL_MCP_TOKEN`` or ``--token-file``) checked on every request: the command
refuses to start without one. Stdout belongs to the protocol on stdio; every message of this
command goes to stderr.
"""

from __future__ import annotations

from pathlib import Path

import click

from scrollctx.cli._app import (
    Bounded,
    kernel_pool_options,
    sandbox_options,
    store_option,
    token_options,
    warn,
)
from scrollctx.config import Config
from scrollctx.errors import MissingDependency
from scrollctx.kernel import SandboxPolicy

__all__ = ["mcp_command"]


@click.command(name="mcp")
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    default=None,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.option("--read-only", is_flag=True, help="Refuse every write tool; never open a writer.")
@click.option(
    "--ingest-dir",
    "ingest_dirs",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="A folder scroll_ingest may import from (repeatable; none: refused).",
)
@click.option(
    "--cell-timeout",
    type=Bounded(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds a scroll_python cell may run; clients may ask for less.",
)
@kernel_pool_options("client session")
@sandbox_options("scroll_python")
@token_options("SCROLL_MCP_TOKEN")
@store_option
def mcp_command(
    http: str | None,
    token: str | None,
    read_only: bool,
    ingest_dirs: tuple[Path, ...],
    sandbox: SandboxPolicy,
    cell_timeout: float,
    idle_timeout: float,
    max_kernels: int,
    config: Config,
) -> None:
    """Serve this store's memory and a sandboxed recall kernel over MCP (stdio or HTTP).

    Example: claude mcp add scroll -- scroll mcp --store ~/.scroll
    """
    try:
        from scrollctx.serve.mcp import ServerOptions, parse_address, serve_http, serve_stdio
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise MissingDependency("the mcp SDK", "mcp") from exc
    options = ServerOptions(
        config,
        transport="http" if http else "stdio",
        read_only=read_only,
        ingest_dirs=ingest_dirs,
        sandbox=sandbox,
        cell_timeout=cell_timeout,
        idle_timeout=idle_timeout,
        max_kernels=max_kernels,
    )
    if http is None:
        if token is not None:
            warn("--token and --token-file apply to --http only; stdio has no network side")
        serve_stdio(options)
        return
    host, port = parse_address(http)
    serve_http(options, host, port, token, on_ready=lambda url: warn(f"scroll mcp: serving {url}"))
