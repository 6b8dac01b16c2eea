"""The ``scroll`` command line. Nothing here runs at import: :func:`main` builds and runs it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from scrollctx.cli._app import invoke, make_group

__all__ = ["COMMANDS", "build_cli", "main", "run"]

COMMANDS: dict[str, str] = {
    "ask": "scrollctx.cli._agent:ask_command",
    "bench": "scrollctx.cli._bench:bench",
    "chat": "scrollctx.cli._agent:chat_command",
    "doctor": "scrollctx.cli._doctor:doctor_command",
    "embed": "scrollctx.cli._embed:embed",
    "exec": "scrollctx.cli._kernel:exec_cell",
    "expand": "scrollctx.cli._history:expand",
    "ingest": "scrollctx.cli._ingest:ingest",
    "kernel": "scrollctx.cli._kernel:kernel_group",
    "mcp": "scrollctx.cli._mcp:mcp_command",
    "run": "scrollctx.cli._agent:run_command",
    "search": "scrollctx.cli._history:search",
    "serve": "scrollctx.cli._serve:serve_command",
    "sessions": "scrollctx.cli._history:sessions",
    "simulate": "scrollctx.cli._view:simulate_command",
    "sql": "scrollctx.cli._history:sql",
    "stats": "scrollctx.cli._history:stats",
    "store": "scrollctx.cli._store:store_group",
    "ui": "scrollctx.cli._ui:ui_command",
    "view": "scrollctx.cli._view:view_command",
    "watch": "scrollctx.cli._watch:watch",
}
"""Every top-level command: name -> ``"module:attribute"``, imported when first used."""


def build_cli() -> click.Group:
    """Build the ``scroll`` group (its commands load lazily, see ``COMMANDS``)."""
    return make_group(COMMANDS)


def run(args: Sequence[str] | None = None) -> int:
    """Run ``scroll`` with ``args`` and return the exit code (for tests and embedding)."""
    return invoke(build_cli(), args)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
