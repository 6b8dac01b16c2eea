"""``scroll ui``: the read-only web inspector of a store (extra ``ui``)."""

from __future__ import annotations

from pathlib import Path

import click

from scrollctx.cli._app import echo, store_option
from scrollctx.config import Config
from scrollctx.errors import UsageError

__all__ = ["ui_command"]


@click.command("ui")
@store_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="Port."
)
@click.option(
    "--token",
    envvar="SCROLL_UI_TOKEN",
    help="Secret every request must carry (required off loopback; env SCROLL_UI_TOKEN).",
)
@click.option(
    "--results",
    "results_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of bench result files (*.jsonl) to browse as reports.",
)
def ui_command(
    config: Config, host: str, port: int, token: str | None, results_dir: Path | None
) -> None:
    """Inspect a store in the browser: sessions, timelines, what the model saw at each call.

    Read-only. Binds to loopback by default; any other address needs --token.

    Example: scroll ui --store .scroll --port 8766
    """
    from scrollctx.serve.ui import UIServer

    if config.store_url is not None:
        raise UsageError("scroll ui reads a store folder; for a shared store, point --store at "
                         "its local replica folder")  # fmt: skip
    server = UIServer(config.db_path, host, port, token or None, results_dir)
    server.run(lambda url: echo(f"scroll ui: {url}  (read-only; Ctrl-C stops it)", err=True))
