"""``scroll watch``: follow folders of live agent transcripts into the store until interrupted.

It catches up first (everything already on disk), then appends each record once its line is
complete. Stdout gets one line per file that gained events (``--json``: one JSON object per
sync, JSON Lines); problems go to stderr as warnings. Ctrl-C stops it (exit 130); ``--once``
catches up, reports and exits 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import FrameType

import click

from scrollctx.cli._app import Bounded, echo, emit, json_option, store_option, warn
from scrollctx.cli._ingest import format_option
from scrollctx.config import Config
from scrollctx.ingest import SyncReport, Watcher
from scrollctx.log import open_store

__all__ = ["watch"]


@click.command()
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--once", is_flag=True, help="Catch up with what is on disk, then exit.")
@click.option("--poll", is_flag=True, help="Poll the files instead of file-system events.")
@click.option(
    "--interval",
    type=Bounded(min=0.05),
    default=0.5,
    show_default=True,
    help="Seconds between polls (and between rescans when quiet).",
)
@format_option
@store_option
@json_option
def watch(
    folders: tuple[Path, ...],
    once: bool,
    poll: bool,
    interval: float,
    format_: str,
    config: Config,
    json_: bool,
) -> None:
    """Follow agent transcripts as they are written and append each new record.

    Restarting adds nothing twice (dedup keys come from the records themselves).

    Example: scroll watch ~/.claude/projects ~/.codex/sessions
    """
    for folder in folders:  # it may appear later (an agent not run yet); a typo must show
        if not folder.exists():
            warn(f"warning: {folder} does not exist (yet); its files are imported once it does")
    with open_store(config) as log:
        watcher = Watcher(log, folders, format=format_)
        _show(watcher.sync(final=once), json_)
        if once:
            return
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, _stop_on(stop))
        try:
            watcher.run(stop, on_sync=lambda r: _show(r, json_), interval=interval, poll=poll)
        finally:
            signal.signal(signal.SIGTERM, previous)


def _stop_on(stop: threading.Event) -> Callable[[int, FrameType | None], None]:
    def _handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return _handler


def _show(report: SyncReport, as_json: bool) -> None:
    for problem in report.problems:
        warn(f"warning: {problem}")
    if as_json:
        emit(asdict(report), as_json=True, human=str)
        sys.stdout.flush()
        return
    for path, added in sorted(report.added_by_file.items()):
        line = f"{path}: {added} events added"
        echo(line)
    sys.stdout.flush()
