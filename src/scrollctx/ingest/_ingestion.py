"""``ingest_path``: stream a file or folder of chat data into the Event Log in batches.

Invariants:

- Events are appended in batches of ``batch_size``, one transaction per batch; a batch is
  durable before ``progress`` hears of it, and a killed process loses at most the batch in
  flight.
- Every event carries a ``dedup_key`` built from source ids, so importing the same input again
  adds nothing (``events_added == 0``) and finishing an interrupted import adds only the rest.
- Bad input raises :class:`~scrollctx.errors.FormatError` naming the file. When the problem is
  found part-way through a file, every event read before it is committed first (they are valid
  events) and the error says how many; importing the fixed file again completes the job.
- A record an importer does not turn into an event is never dropped silently: it is counted
  by record type in ``records_skipped`` and, when it was not understood (an unknown record
  type, a line that is not JSON or not UTF-8, a truncated last line), reported with its file
  and line in ``problems``; the rest of the file is still imported.
- Library code never prints: progress goes to the optional callbacks only.
- After a successful import, each conversation it touched has its carried index (paper §3.3:
  one block per session, :func:`scrollctx.view.write_carried_indexes`) brought up to date, so
  a question about it opens from it; re-importing the same input writes none.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from scrollctx.errors import FormatError, UsageError
from scrollctx.ingest._jsonstream import Sample, probe
from scrollctx.ingest._registry import (
    AUTO,
    Importer,
    detect_importer,
    get_importer,
    importers,
    require_importer,
)
from scrollctx.ingest._transcript import Skip
from scrollctx.ingest._turns import natural_key
from scrollctx.log import EventStore, NewEvent, storable_text
from scrollctx.view import write_carried_indexes

__all__ = [
    "FORMATS",
    "FileProgress",
    "FormatReport",
    "IngestReport",
    "MAX_PROBLEMS",
    "Progress",
    "append_counted",
    "candidates",
    "ingest_path",
]

Progress = Callable[[int, int | None], None]
"""Called after each committed batch with (events read so far, total if known else None)."""

FileProgress = Callable[[Path, int, int], None]
"""Called before each file of a folder with (file, its 0-based index, number of files)."""

MAX_PROBLEMS = 100
"""Problem lines kept in a report; ``records_skipped`` still counts every one."""

_SUFFIXES = (".json", ".jsonl", ".md")


def _formats() -> tuple[str, ...]:
    return (AUTO, *sorted(importer.name for importer in importers()))


FORMATS: tuple[str, ...] = _formats()
"""Names accepted by ``format=``: ``auto`` plus the importers registered at import time."""


@dataclass(frozen=True, slots=True)
class FormatReport:
    """One format's share of an import: ``events_skipped`` were already in the store."""

    files: int
    sessions: int
    events_added: int
    events_skipped: int
    records_skipped: dict[str, int]


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ``ingest_path`` call did. ``events_skipped`` were already in the store.

    ``records_skipped`` counts source records that became no event, by record type;
    ``problems`` names the file and line of each one that was not understood (at most
    :data:`MAX_PROBLEMS`); ``files_unrecognised`` counts files of a folder in no known format.
    """

    path: str
    format: str
    conversations: int
    sessions: int
    events_added: int
    events_skipped: int
    seconds: float
    files: int = 0
    files_unrecognised: int = 0
    records_skipped: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    formats: dict[str, FormatReport] = field(default_factory=dict)


@dataclass(slots=True)
class _Tally:
    conversations: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    files: int = 0
    read: int = 0
    added: int = 0
    skipped: int = 0
    records_skipped: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def format_report(self) -> FormatReport:
        return FormatReport(
            self.files, len(self.sessions), self.added, self.skipped, dict(self.records_skipped)
        )


def ingest_path(
    log: EventStore,
    path: Path,
    *,
    format: str = AUTO,
    progress: Progress | None = None,
    on_file: FileProgress | None = None,
    batch_size: int = 2000,
) -> IngestReport:
    """Import a chat file or folder into ``log`` and report what was added.

    Args:
        path: a file (JSON array, JSON object or JSONL) or a folder; a folder imports every
            ``.json``/``.jsonl`` file under it that matches the format (others are skipped).
        format: ``auto`` (detect by content) or one of :data:`FORMATS`.
        progress: called after each committed batch as ``progress(events_read, None)``.
        on_file: called before each file as ``on_file(file, index, number_of_files)``.
        batch_size: events per transaction.

    Raises:
        FormatError: the path is missing, unreadable, malformed or of no known format.
        UsageError: unknown ``format`` or a non-positive ``batch_size``.
    """
    if format != AUTO:
        get_importer(format)
    if batch_size < 1:
        raise UsageError(f"batch_size must be at least 1, got {batch_size}")
    started = time.perf_counter()
    path = Path(path)
    sources, unrecognised = _sources(path, format)
    tally = _Tally()
    by_format: dict[str, _Tally] = {}
    for index, (file, sample, importer) in enumerate(sources):
        if on_file is not None:
            on_file(file, index, len(sources))
        share = by_format.setdefault(importer.name, _Tally())
        _ingest_file(log, file, sample, importer, (tally, share), progress, batch_size)
    write_carried_indexes(log, tally.conversations)  # paper §3.3: see scrollctx.view._carried
    return IngestReport(
        path=str(path),
        format="+".join(sorted(by_format)),
        conversations=len(tally.conversations),
        sessions=len(tally.sessions),
        events_added=tally.added,
        events_skipped=tally.skipped,
        seconds=round(time.perf_counter() - started, 3),
        files=len(sources),
        files_unrecognised=unrecognised,
        records_skipped=dict(tally.records_skipped),
        problems=tally.problems,
        formats={name: share.format_report() for name, share in sorted(by_format.items())},
    )


def _sources(path: Path, format: str) -> tuple[list[tuple[Path, Sample, Importer]], int]:
    if not path.exists():
        raise FormatError(f"{path} does not exist; check the path", path=str(path))
    if not path.is_dir():
        sample = probe(path)
        return [(path, sample, require_importer(sample, format))], 0
    found, unrecognised = [], 0
    for file in candidates(path):
        try:
            sample = probe(file)
        except FormatError:
            unrecognised += 1  # an empty or unreadable file in a tree is not a transcript
            continue
        importer = detect_importer(sample) if format == AUTO else get_importer(format)
        if importer is not None and importer.sniff(sample):
            found.append((file, sample, importer))
        else:
            unrecognised += 1
    if not found:
        wanted = "chat data" if format == AUTO else f"{format} data"
        raise FormatError(
            f"{path} is a folder with no importable file ({wanted} in .json or .jsonl files)",
            path=str(path),
        )
    return found, unrecognised


def candidates(folder: Path) -> list[Path]:
    """The files under ``folder`` an importer may read, in natural order."""
    files = [p for p in folder.rglob("*") if p.suffix in _SUFFIXES and p.is_file()]
    return sorted(files, key=lambda p: natural_key(p.relative_to(folder).as_posix()))


def _ingest_file(
    log: EventStore,
    file: Path,
    sample: Sample,
    importer: Importer,
    tallies: tuple[_Tally, _Tally],
    progress: Progress | None,
    batch_size: int,
) -> None:
    pending: list[NewEvent] = []
    tally = tallies[0]
    added_before = tally.added
    for share in tallies:
        share.files += 1
    try:
        for item in importer.read(file, sample):
            if isinstance(item, Skip):
                _count_skip(tallies, file, item)
                continue
            for share in tallies:
                share.read += 1
                share.sessions.add(item.session_id)
            if item.task_id is not None:
                tally.conversations.add(storable_text(item.task_id))  # as it is stored
            pending.append(item)
            if len(pending) >= batch_size:
                _commit(log, pending, tallies, progress)
                pending = []
    except FormatError as exc:
        _commit(log, pending, tallies, progress)
        kept = tally.added - added_before
        raise FormatError(
            f"{exc} ({kept} new events read from {file.name} before the problem were kept; "
            "fix the file and import it again to finish)",
            path=str(file),
        ) from exc
    _commit(log, pending, tallies, progress)


def _count_skip(tallies: tuple[_Tally, ...], file: Path, skip: Skip) -> None:
    for share in tallies:
        share.records_skipped[skip.record_type] += 1
    problems = tallies[0].problems
    if skip.reason is not None and len(problems) < MAX_PROBLEMS:
        where = f"{file}:{skip.line}" if skip.line is not None else str(file)
        problems.append(f"{where}: {skip.record_type}: {skip.reason}")


def _commit(
    log: EventStore, batch: list[NewEvent], tallies: tuple[_Tally, ...], progress: Progress | None
) -> None:
    if not batch:
        return
    added = append_counted(log, batch)
    for share in tallies:
        share.added += added
        share.skipped += len(batch) - added
    if progress is not None:
        progress(tallies[0].read, None)


def append_counted(log: EventStore, batch: list[NewEvent]) -> int:
    """Append ``batch`` in one transaction; return how many events were new."""
    with log.atomic():
        # Read the high-water mark inside the write transaction: seqs above it are ours, the
        # rest are dedup repeats (including rows another process imported meanwhile).
        before = log.last_seq()
        seqs = log.append_many(batch)
    return len({seq for seq in seqs if seq > before})
