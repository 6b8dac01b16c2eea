"""``Watcher``: follow folders of live agent transcripts and append each record once complete.

How it works: the roots are scanned once (every file whose content is a known format gets a
follower), then each *sync* reads what the followers' files gained and commits it in batches.
Syncs run when the file system reports a change (``watchfiles``, when installed and not told
to poll) or every ``interval`` seconds (polling: the roots are rescanned and every file is
stat-ed).

Invariants:

- A line is imported once it is complete (ends with a newline); a partial last line is read
  again, whole, by a later sync. JSONL transcripts are followed from the byte after the last
  complete line; whole-document formats (Gemini CLI, ChatGPT export, Aider) are read again
  whole when their size or modification time changes, and a half-written document is retried.
- A file replaced under the watcher (new inode, or shorter than what was read) or deleted and
  created again gets a new follower that reads it from its first byte; nothing is doubled,
  because every event's ``dedup_key`` is derived from its record. For the same reason a
  restarted watcher re-reads every file and adds only what is new.
- Everything a sync reads is committed before the sync returns (one transaction per batch).
- Only regular files are read: a FIFO, socket or device in a watched tree (a file-system event
  names it like any file) is never opened, since opening a FIFO blocks until someone writes.
"""

from __future__ import annotations

import stat as file_mode
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from scrollctx.errors import FormatError
from scrollctx.ingest._ingestion import MAX_PROBLEMS, append_counted, candidates
from scrollctx.ingest._jsonstream import Sample, probe
from scrollctx.ingest._registry import AUTO, Importer, detect_importer, get_importer
from scrollctx.ingest._transcript import Follower, Item, Skip
from scrollctx.log import EventStore, NewEvent

__all__ = ["SyncReport", "Watcher"]


@dataclass(slots=True)
class SyncReport:
    """What one sync did: events added and already present, records skipped, problems."""

    files: int = 0
    events_added: int = 0
    events_skipped: int = 0
    records_skipped: int = 0
    problems: list[str] = field(default_factory=list)
    added_by_file: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Followed:
    follower: Follower
    importer: Importer
    identity: tuple[int, int]
    size: int
    mtime_ns: int


class _Reread:
    """A follower for whole-document formats: read the file again when it changed."""

    replaced = False  # read whole each time: a replaced file needs no new reader

    def __init__(self, path: Path, importer: Importer) -> None:
        self.path, self.importer = path, importer

    def read(self, *, final: bool) -> Iterator[Item]:
        """Yield every event of the file; a document that does not parse yet is retried."""
        try:
            yield from self.importer.read(self.path, probe(self.path))
        except FormatError as exc:
            if final:
                raise
            # Half-written (the agent rewrites the whole document): the next change retries.
            yield Skip("unreadable document", None, f"{exc}; retried when the file changes")


class Watcher:
    """Follows the files under ``roots`` and appends their new records to ``log``."""

    def __init__(
        self,
        log: EventStore,
        roots: Iterable[Path],
        *,
        format: str = AUTO,
        batch_size: int = 2000,
    ) -> None:
        if format != AUTO:
            get_importer(format)
        self.log = log
        self.roots = [Path(root) for root in roots]
        self.format = format
        self.batch_size = batch_size
        self.followed: dict[Path, _Followed] = {}

    # -- one pass ---------------------------------------------------------------------------

    def sync(self, changed: Iterable[Path] | None = None, *, final: bool = False) -> SyncReport:
        """Read what changed (``None``: rescan every root) and commit it; return what it did."""
        report = SyncReport()
        paths = self._scan() if changed is None else self._expand(changed)
        for path in sorted(paths):
            follower = self._follower(path)
            if follower is not None:
                report.files += 1
                self._drain(path, follower, report, final)
            if follower is not None and follower.replaced:
                self.followed.pop(path)  # rewritten in place: read it again from the start
                if (fresh := self._follower(path)) is not None:
                    self._drain(path, fresh, report, final)
        return report

    def _scan(self) -> set[Path]:
        found = {path for root in self.roots for path in self._files(root)}
        return found | set(self.followed)  # known files too: deleted ones are dropped

    def _expand(self, changed: Iterable[Path]) -> set[Path]:
        paths: set[Path] = set()
        for path in changed:
            paths |= set(self._files(path)) if path.is_dir() else {path}
        return paths

    @staticmethod
    def _files(root: Path) -> list[Path]:
        if root.is_file():
            return [root]
        return candidates(root) if root.is_dir() else []

    def _follower(self, path: Path) -> Follower | None:
        try:
            stat = path.stat()
        except OSError:  # gone, or a symlink loop: nothing to read
            stat = None
        if stat is None or not file_mode.S_ISREG(stat.st_mode):
            self.followed.pop(path, None)  # deleted (its events stay) or not a file to read
            return None
        identity = (stat.st_dev, stat.st_ino)
        known = self.followed.get(path)
        if known is not None and known.identity == identity and stat.st_size >= known.size:
            if (stat.st_size, stat.st_mtime_ns) == (known.size, known.mtime_ns):
                return None  # unchanged
            known.size, known.mtime_ns = stat.st_size, stat.st_mtime_ns
            return known.follower
        importer = self._importer(path)
        if importer is None:
            return None
        follower = importer.follow(path) if importer.follow else _Reread(path, importer)
        self.followed[path] = _Followed(
            follower, importer, identity, stat.st_size, stat.st_mtime_ns
        )
        return follower

    def _importer(self, path: Path) -> Importer | None:
        try:
            sample: Sample = probe(path)
        except FormatError:
            return None  # empty, or no complete first record yet: looked at again on change
        importer = detect_importer(sample) if self.format == AUTO else get_importer(self.format)
        return importer if importer is not None and importer.sniff(sample) else None

    def _drain(self, path: Path, follower: Follower, report: SyncReport, final: bool) -> None:
        pending: list[NewEvent] = []
        for item in follower.read(final=final):
            if isinstance(item, Skip):
                report.records_skipped += 1
                if item.reason is not None and len(report.problems) < MAX_PROBLEMS:
                    where = f"{path}:{item.line}" if item.line is not None else str(path)
                    report.problems.append(f"{where}: {item.record_type}: {item.reason}")
                continue
            pending.append(item)
            if len(pending) >= self.batch_size:
                self._commit(path, pending, report)
                pending = []
        self._commit(path, pending, report)

    def _commit(self, path: Path, batch: list[NewEvent], report: SyncReport) -> None:
        if not batch:
            return
        added = append_counted(self.log, batch)
        report.events_added += added
        report.events_skipped += len(batch) - added
        if added:
            report.added_by_file[str(path)] = report.added_by_file.get(str(path), 0) + added

    # -- following --------------------------------------------------------------------------

    def run(
        self,
        stop: threading.Event,
        *,
        on_sync: Callable[[SyncReport], None] | None = None,
        interval: float = 0.5,
        poll: bool = False,
    ) -> None:
        """Sync until ``stop`` is set: on file-system events, or every ``interval`` seconds."""
        changes = None if poll else _change_batches(self.roots, stop, interval)
        while not stop.is_set():
            if changes is None:
                report = self.sync()
                stop.wait(interval)
            else:
                batch = next(changes, None)
                if batch is None:
                    return
                report = self.sync(batch) if batch else self.sync()
            if on_sync is not None and (report.events_added or report.problems):
                on_sync(report)


def _change_batches(
    roots: list[Path], stop: threading.Event, interval: float
) -> Iterator[set[Path]] | None:
    """Sets of changed paths from ``watchfiles`` (an empty set on a quiet ``interval``)."""
    try:
        import watchfiles
    except ImportError:
        return None
    watched = [str(root) for root in roots if root.exists()]
    if not watched:
        return None

    def batches() -> Iterator[set[Path]]:
        for changes in watchfiles.watch(
            *watched,
            stop_event=stop,
            yield_on_timeout=True,
            rust_timeout=max(1, int(interval * 1000)),
            debounce=200,
            step=20,
            raise_interrupt=True,
        ):
            yield {Path(changed) for _, changed in changes}

    return batches()
