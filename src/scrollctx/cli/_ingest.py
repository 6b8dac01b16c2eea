"""``scroll ingest``: import chat files or folders into the store's Event Log.

Each path is imported and committed before the next one starts, so an error on a later path
leaves the earlier ones in the store. A progress bar is drawn on stderr only when stderr is a
terminal; stdout carries the reports only, and the lines a file could not import (its problems)
go to stderr as warnings.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import click

from scrollctx.cli._app import echo, emit, json_option, store_option, terminal_safe, warn
from scrollctx.config import Config
from scrollctx.errors import UsageError
from scrollctx.ingest import (
    FORMATS,
    MAX_PROBLEMS,
    FileProgress,
    IngestReport,
    Progress,
    ingest_path,
)
from scrollctx.log import EventLog, EventStore, open_store

__all__ = ["format_option", "ingest"]


format_option = click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="auto",
    show_default=True,
    help="Input format; auto detects each file's from its content.",
)
"""``--format NAME``, shared with ``scroll watch``."""

_MERGE_SHARE = 10
"""An import that adds at least 1/_MERGE_SHARE of the store's rows merges its search index."""


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@format_option
@click.option(
    "--embed",
    is_flag=True,
    help="Also compute the vectors semantic search uses (as `scroll embed`; semantic extra).",
)
@store_option
@json_option
def ingest(paths: tuple[Path, ...], format_: str, embed: bool, config: Config, json_: bool) -> None:
    """Import agent transcripts (Claude Code, Codex, Gemini CLI, ChatGPT, Aider) or chat data.

    A folder is walked and each file's format detected by its content. Re-importing adds only
    what is new (every event has a dedup key derived from its source record).

    Example: scroll ingest ~/.claude/projects ~/.codex/sessions ../shared/data/beam/chats/100K
    """
    reports: list[IngestReport] = []
    if embed and config.store_url is not None:
        raise UsageError("--embed needs a folder store: vectors live beside a SQLite log")
    encoder = _encoder() if embed else None  # a missing extra fails before anything is written
    with open_store(config) as log:
        try:
            for path in paths:
                with _progress_bar(path) as (progress, on_file):
                    report = ingest_path(
                        log, path, format=format_, progress=progress, on_file=on_file
                    )
                reports.append(report)
                _warn_problems(report)
                if not json_:
                    echo(_describe(report))
            _merge_if_grown(log, sum(r.events_added for r in reports))
            if encoder is not None:
                _embed(cast(EventLog, log), encoder, quiet=json_)
        finally:
            if json_:
                emit([asdict(r) for r in reports], as_json=True, human=str)


def _merge_if_grown(log: EventStore, added: int) -> None:
    """Merge the search index after an import that added at least a tenth of the store.

    A merged index makes ``ms.search`` cheaper, but merging rewrites the whole index (2 s for
    60K rows, 4-14 s for 200K on a shared disk): worth it after a bulk import, not after each
    small one, whose few segments FTS5's own automerge keeps in check.
    """
    if isinstance(log, EventLog) and added and added * _MERGE_SHARE >= log.count():
        log.merge_search_index()


def _encoder() -> Any:
    from scrollctx.surface import load_encoder

    return load_encoder()


def _embed(log: EventLog, encoder: Any, *, quiet: bool) -> None:
    from scrollctx.surface import embed_pending

    report = embed_pending(log, encoder)
    if not quiet:
        echo(f"embedded {report.rows} rows ({report.vectors} vectors, {report.model})")


def _describe(report: IngestReport) -> str:
    lines = [
        f"{report.path}: {report.format}, {report.conversations} conversations, "
        f"{report.sessions} sessions, {report.events_added} events added, "
        f"{report.events_skipped} already present ({report.seconds:.1f}s)"
    ]
    if len(report.formats) > 1:
        for name, share in report.formats.items():
            lines.append(
                f"  {name}: {share.files} files, {share.sessions} sessions, "
                f"{share.events_added} events added, {share.events_skipped} already present"
            )
    if report.records_skipped:
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(report.records_skipped.items()))
        lines.append(f"  records skipped: {counts}")
    if report.files_unrecognised:
        lines.append(f"  files in no known format: {report.files_unrecognised}")
    return "\n".join(lines)


def _warn_problems(report: IngestReport) -> None:
    for problem in report.problems:
        warn(f"warning: {problem}")
    hidden = sum(report.records_skipped.values()) - len(report.problems)
    if len(report.problems) >= MAX_PROBLEMS and hidden > 0:
        warn("warning: more records were skipped than shown; see records_skipped in --json")


@contextmanager
def _progress_bar(path: Path) -> Iterator[tuple[Progress | None, FileProgress | None]]:
    if not sys.stderr.isatty():
        yield None, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    # A file name is the user's data, not rich markup; it may hold escape sequences.
    description = TextColumn("{task.description}", markup=False)
    columns: list[Any] = [SpinnerColumn(), description, BarColumn(), TimeElapsedColumn()]
    with Bar(*columns, console=Console(stderr=True), transient=True) as bar:
        current = [terminal_safe(path.name, is_terminal=True)]
        task = bar.add_task(f"{current[0]}: 0 events", total=None)

        def _update(done: int, total: int | None) -> None:
            bar.update(task, description=f"{current[0]}: {done:,} events")

        def _next_file(file: Path, index: int, files: int) -> None:
            name = terminal_safe(file.name, is_terminal=True)
            current[0] = name if files == 1 else f"{name} ({index + 1}/{files})"
            bar.update(task, completed=index, total=files, description=current[0])

        yield _update, _next_file
