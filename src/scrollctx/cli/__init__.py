"""The ``scroll`` command line. Nothing here runs at import: :func:`main` builds and runs it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from scrollctx.cli._app import invoke, make_group

__all__ = ["build_cli", "main", "run"]

# One module per command family; each exposes ``register(group)``.
_COMMAND_MODULES: list[str] = [
    "scrollctx.cli._agent",
    "scrollctx.cli._bench",
    "scrollctx.cli._history",
    "scrollctx.cli._ingest",
    "scrollctx.cli._kernel",
    "scrollctx.cli._view",
]


def build_cli() -> click.Group:
    """Build the ``scroll`` group with every command registered."""
    group = make_group()
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(group)
    return group


def run(args: Sequence[str] | None = None) -> int:
    """Run ``scroll`` with ``args`` and return the exit code (for tests and embedding)."""
    return invoke(build_cli(), args)


def main() -> None:
    """Console-script entry point."""
    sys.exit(run())
