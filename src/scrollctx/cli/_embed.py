"""``scroll embed``: give the store's rows vectors for semantic search, resuming where it stopped.

The work is :func:`scrollctx.surface.embed_pending`: rows past the model's mark, in batches,
each batch committed with the mark, so Ctrl-C or a kill loses at most one batch and the next
run continues after the last committed one. A progress bar is drawn on stderr only when stderr
is a terminal; stdout carries the report only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

import click

from scrollctx.cli._app import emit, json_option, store_option
from scrollctx.config import Config
from scrollctx.errors import StoreError, UsageError
from scrollctx.log import EventLog
from scrollctx.surface import EmbedProgress, EmbedReport, embed_pending, load_encoder
from scrollctx.surface._semantic_embed import BATCH_ROWS

__all__ = ["embed"]


@click.command()
@click.option(
    "--batch",
    "batch_rows",
    type=click.IntRange(min=1),
    default=BATCH_ROWS,
    show_default=True,
    help="Rows per committed batch (a kill loses at most one).",
)
@store_option
@json_option
def embed(batch_rows: int, config: Config, json_: bool) -> None:
    """Compute the vectors semantic and hybrid search need (resumable; needs the semantic extra).

    Example: scroll embed --store .scroll
    """
    if config.store_url is not None:
        raise UsageError(
            "scroll embed needs a folder store: vectors live beside a SQLite log, and a shared "
            "store's replica is rebuilt from the database (semantic search there: not yet)"
        )
    if not config.db_path.is_file():
        raise StoreError(f"no store at {config.store_dir}; run `scroll ingest FILE` first")
    encoder = load_encoder()
    with EventLog.open(config.db_path) as log, _progress_bar() as progress:
        report = embed_pending(log, encoder, batch_rows=batch_rows, progress=progress)
    emit(asdict(report), as_json=json_, human=_describe)


def _describe(data: dict[str, object]) -> str:
    report = EmbedReport(**data)  # type: ignore[arg-type]
    if not report.rows:
        return f"nothing to embed: every row is embedded with {report.model}"
    return (
        f"embedded {report.rows} rows ({report.vectors} vectors, {report.model}); "
        f"the store is embedded through seq {report.through_seq}"
    )


@contextmanager
def _progress_bar() -> Iterator[EmbedProgress | None]:
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    columns = [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("embedding", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance
