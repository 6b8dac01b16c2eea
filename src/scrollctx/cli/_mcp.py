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

from scrollctx.cli._app import store_option, warn
from scrollctx.config import Config
from scrollctx.errors import MissingDependency, UsageError
from scrollctx.kernel import LAYERS, PROFILES, SandboxPolicy

__all__ = ["mcp_command"]


@click.command(name="mcp")
@click.option(
    "--http",
    "http",
    metavar="HOST:PORT",
    default=None,
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.option(
    "--token",
    envvar="SCROLL_MCP_TOKEN",
    default=None,
    help="Bearer token HTTP clients must send (env SCROLL_MCP_TOKEN).",
)
@click.option(
    "--token-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Read the bearer token from this file instead.",
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
    "--sandbox",
    type=click.Choice(PROFILES),
    default="strict",
    show_default=True,
    help="scroll_python sandbox; anything but strict is an opt-out (shown, logged).",
)
@click.option(
    "--without",
    multiple=True,
    type=click.Choice(LAYERS),
    envvar="SCROLL_SANDBOX_WITHOUT",
    help="Treat a sandbox layer as missing here (repeatable).",
)
@click.option(
    "--cell-timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds a scroll_python cell may run; clients may ask for less.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Seconds a client's kernel may sit unused before it is closed.",
)
@click.option(
    "--max-kernels",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Kernels (one per client session) alive at once.",
)
@store_option
def mcp_command(
    http: str | None,
    token: str | None,
    token_file: Path | None,
    read_only: bool,
    ingest_dirs: tuple[Path, ...],
    sandbox: str,
    without: tuple[str, ...],
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
        sandbox=SandboxPolicy(sandbox, unavailable=frozenset(without)),
        cell_timeout=cell_timeout,
        idle_timeout=idle_timeout,
        max_kernels=max_kernels,
    )
    secret = _token(token, token_file)
    if http is None:
        if secret is not None:
            warn("--token and --token-file apply to --http only; stdio has no network side")
        serve_stdio(options)
        return
    host, port = parse_address(http)
    serve_http(options, host, port, secret, on_ready=lambda url: warn(f"scroll mcp: serving {url}"))


def _token(token: str | None, token_file: Path | None) -> str | None:
    if token is not None and token_file is not None:
        raise UsageError("pass the token with --token or with --token-file, not both")
    if token_file is None:
        return token or None
    try:
        text = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the token file {token_file}: {exc}") from exc
    if not text:
        raise UsageError(f"the token file {token_file} is empty")
    return text
