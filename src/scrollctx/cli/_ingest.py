"""``scroll ingest``: import chat files or folders into the store's Event Log.

Each path is imported and committed before the next one starts, so an error on a later path
leaves the earlier ones in the store. A progress bar is drawn on stderr only when stderr is a
terminal; stdout carries the reports only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import emit, json_option, store_option
from scrollctx.config import Config
from scrollctx.ingest import FORMATS, IngestReport, Progress, ingest_path
from scrollctx.log import EventLog

__all__ = ["ingest"]


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Input format; auto detects it from the content.",
)
@store_option
@json_option
def ingest(paths: tuple[Path, ...], format_: str, config: Config, json_: bool) -> None:
    """Import LoCoMo, BEAM, LongMemEval or OpenAI-style chat files into the Event Log.

    Re-importing a file adds nothing (every event has a deterministic dedup key).

    Example: scroll ingest ../shared/data/locomo/locomo10.json ../shared/data/beam/chats/100K
    """
    reports: list[IngestReport] = []
    with EventLog.open(config.db_path) as log:
        try:
            for path in paths:
                with _progress_bar(path) as progress:
                    report = ingest_path(log, path, format=format_, progress=progress)
                reports.append(report)
                if not json_:
                    click.echo(_describe(report))
        finally:
            if json_:
                emit([asdict(r) for r in reports], as_json=True, human=str)


def _describe(report: IngestReport) -> str:
    return (
        f"{report.path}: {report.format}, {report.conversations} conversations, "
        f"{report.sessions} sessions, {report.events_added} events added, "
        f"{report.events_skipped} already present ({report.seconds:.1f}s)"
    )


@contextmanager
def _progress_bar(path: Path) -> Iterator[Progress | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    with Bar(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"{path.name}: 0 events", total=None)

        def _update(done: int, total: int | None) -> None:
            bar.update(task, description=f"{path.name}: {done:,} events", total=total)

        yield _update
