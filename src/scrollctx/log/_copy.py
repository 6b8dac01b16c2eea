"""Copy one Event Log into another, losslessly and resumably (``scroll store copy``).

Any backend to any backend (a SQLite folder to PostgreSQL and back): events keep their seqs,
every field and their checksums; payloads are copied before the rows that reference them.

- Resumable: the target must be empty or hold a prefix of the source (its last event equal to
  the source's event at that seq); the copy continues after it, one committed page at a time,
  so an interrupted copy loses at most the page in flight and rerunning finishes it.
- Lossless, and proved so: :func:`log_digest` hashes every event (all its fields, in seq order)
  and every payload's bytes; the copy ends by comparing the two digests and raises
  :class:`IntegrityError` if they differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from scrollctx.errors import IntegrityError, UsageError
from scrollctx.log._base import EventStore
from scrollctx.log._events import Event

__all__ = ["CopyResult", "copy_log", "log_digest"]

PAGE = 2000

Progress = Callable[[int, int], None]
"""Called with (seq copied up to, the source's last seq) after each page."""


@dataclass(frozen=True, slots=True)
class CopyResult:
    """What a copy did: events copied now, where it resumed, the last seq, the shared digest."""

    copied: int
    resumed_after: int
    last_seq: int
    events: int
    digest: str


def copy_log(
    source: EventStore, target: EventStore, *, progress: Progress | None = None
) -> CopyResult:
    """Copy every event of ``source`` that ``target`` lacks, then verify both digests match.

    Raises:
        UsageError: ``target`` holds events that are not a prefix of ``source``.
        IntegrityError: the digests differ after the copy.
    """
    resumed = _resume_point(source, target)
    done, copied, total = resumed, 0, source.last_seq()
    while events := source.events_after(done, PAGE):
        for event in events:
            sha = event.payload_sha256
            if sha is not None and not target.payloads.has(sha):
                target.payloads.put(source.payloads.get(sha, seq=event.seq))
        target.import_events(events)
        done, copied = events[-1].seq, copied + len(events)
        if progress is not None:
            progress(done, max(total, done))
    source_digest, count = log_digest(source, upto=done)
    target_digest, _ = log_digest(target, upto=done)
    if source_digest != target_digest:
        raise IntegrityError(
            f"the copy differs from its source (digest {target_digest[:16]}… vs "
            f"{source_digest[:16]}…); nothing was removed — check both with scroll doctor"
        )
    return CopyResult(copied, resumed, done, count, source_digest)


def log_digest(store: EventStore, *, upto: int | None = None) -> tuple[str, int]:
    """Return the sha256 over every event up to ``upto`` and every payload; and the count."""
    digest = hashlib.sha256()
    after, count = 0, 0
    limit = store.last_seq() if upto is None else upto
    while events := [e for e in store.events_after(after, PAGE) if e.seq <= limit]:
        for event in events:
            digest.update(_canonical(event))
            if event.payload_sha256 is not None:
                digest.update(store.payloads.get(event.payload_sha256, seq=event.seq))
        count += len(events)
        after = events[-1].seq
    return digest.hexdigest(), count


def _resume_point(source: EventStore, target: EventStore) -> int:
    last = target.last_seq()
    if last == 0:
        return 0
    mine = target.events([last])
    theirs = source.events([last])
    if not mine or not theirs or _canonical(mine[0]) != _canonical(theirs[0]):
        raise UsageError(
            f"the target already holds events up to seq {last} that are not the source's; "
            "copy into an empty store (or the same target, to resume an interrupted copy)"
        )
    return last


def _canonical(event: Event) -> bytes:
    data = json.dumps(event.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return data.encode("utf-8") + b"\n"
