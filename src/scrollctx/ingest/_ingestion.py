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
- Library code never prints: progress goes to the optional callback only.
"""

from __future__ import annotations

import time
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
from scrollctx.ingest._turns import natural_key
from scrollctx.log import EventLog, NewEvent

__all__ = ["FORMATS", "IngestReport", "Progress", "ingest_path"]

Progress = Callable[[int, int | None], None]
"""Called after each committed batch with (events read so far, total if known else None)."""

_SUFFIXES = (".json", ".jsonl")


def _formats() -> tuple[str, ...]:
    return (AUTO, *sorted(importer.name for importer in importers()))


FORMATS: tuple[str, ...] = _formats()
"""Names accepted by ``format=``: ``auto`` plus the importers registered at import time."""


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ``ingest_path`` call did. ``events_skipped`` were already in the store."""

    path: str
    format: str
    conversations: int
    sessions: int
    events_added: int
    events_skipped: int
    seconds: float


@dataclass(slots=True)
class _Tally:
    conversations: set[str] = field(default_factory=set)
    sessions: set[str] = field(default_factory=set)
    read: int = 0
    added: int = 0
    skipped: int = 0


def ingest_path(
    log: EventLog,
    path: Path,
    *,
    format: str = AUTO,
    progress: Progress | None = None,
    batch_size: int = 2000,
) -> IngestReport:
    """Import a chat file or folder into ``log`` and report what was added.

    Args:
        path: a file (JSON array, JSON object or JSONL) or a folder; a folder imports every
            ``.json``/``.jsonl`` file under it that matches the format (others are skipped).
        format: ``auto`` (detect by content) or one of :data:`FORMATS`.
        progress: called after each committed batch as ``progress(events_read, None)``.
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
    sources = _sources(path, format)
    tally = _Tally()
    for file, sample, importer in sources:
        _ingest_file(log, file, sample, importer, tally, progress, batch_size)
    return IngestReport(
        path=str(path),
        format="+".join(sorted({importer.name for _, _, importer in sources})),
        conversations=len(tally.conversations),
        sessions=len(tally.sessions),
        events_added=tally.added,
        events_skipped=tally.skipped,
        seconds=round(time.perf_counter() - started, 3),
    )


def _sources(path: Path, format: str) -> list[tuple[Path, Sample, Importer]]:
    if not path.exists():
        raise FormatError(f"{path} does not exist; check the path", path=str(path))
    if not path.is_dir():
        sample = probe(path)
        return [(path, sample, require_importer(sample, format))]
    found = []
    for file in _candidates(path):
        sample = probe(file)
        importer = detect_importer(sample) if format == AUTO else get_importer(format)
        if importer is not None and importer.sniff(sample):
            found.append((file, sample, importer))
    if not found:
        wanted = "chat data" if format == AUTO else f"{format} data"
        raise FormatError(
            f"{path} is a folder with no importable file ({wanted} in .json or .jsonl files)",
            path=str(path),
        )
    return found


def _candidates(folder: Path) -> list[Path]:
    files = [p for p in folder.rglob("*") if p.suffix in _SUFFIXES and p.is_file()]
    return sorted(files, key=lambda p: natural_key(p.relative_to(folder).as_posix()))


def _ingest_file(
    log: EventLog,
    file: Path,
    sample: Sample,
    importer: Importer,
    tally: _Tally,
    progress: Progress | None,
    batch_size: int,
) -> None:
    pending: list[NewEvent] = []
    added_before = tally.added
    try:
        for event in importer.read(file, sample):
            tally.read += 1
            tally.sessions.add(event.session_id)
            if event.task_id is not None:
                tally.conversations.add(event.task_id)
            pending.append(event)
            if len(pending) >= batch_size:
                _commit(log, pending, tally, progress)
                pending = []
    except FormatError as exc:
        _commit(log, pending, tally, progress)
        kept = tally.added - added_before
        raise FormatError(
            f"{exc} ({kept} new events read from {file.name} before the problem were kept; "
            "fix the file and import it again to finish)",
            path=str(file),
        ) from exc
    _commit(log, pending, tally, progress)


def _commit(log: EventLog, batch: list[NewEvent], tally: _Tally, progress: Progress | None) -> None:
    if not batch:
        return
    with log.atomic():
        # Read the high-water mark inside the write transaction: seqs above it are ours, the
        # rest are dedup repeats (including rows another process imported meanwhile).
        before = log.last_seq()
        seqs = log.append_many(batch)
    new = {seq for seq in seqs if seq > before}
    tally.added += len(new)
    tally.skipped += len(seqs) - len(new)
    if progress is not None:
        progress(tally.read, None)
