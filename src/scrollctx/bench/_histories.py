"""The evaluation protocol's ingestion (paper §3.3): one base store per history, then one copy
per probe question.

Protocol:

- A history (one conversation) is read with its importer and appended to a fresh Event Log
  **session by session, in chronological order**, one transaction per session. No model call
  is made (unless a ``transform`` asks for one: the lossy-summary ablation).
- At each session boundary the raw context is cleared: nothing of the session stays live, and
  what is carried forward is Scroll's state only: the Event Log and the conversation's carried
  index, to which each finished session adds one block (:mod:`scrollctx.view._carried`, the
  same index ``scroll ingest`` writes; ``with_index=False`` leaves it out: the "Scroll w/o
  index" ablation). A probe (``Agent.ask`` with the history's task id) opens from it.
- Every probe question runs in its own copy of the base store (:func:`copy_store`), so probes
  never see each other's turns, and may run in parallel.

Invariants: a base store is used only once its ``bench_store.json`` marker exists (written
last, by rename); a folder without the marker is an interrupted build and is rebuilt from
scratch. ``corpus_tokens`` is the estimated token count of the original history events
(before any transform, so a lossy store is measured against what it replaced).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from scrollctx.bench._questions import History
from scrollctx.errors import UsageError
from scrollctx.ingest import get_importer, probe
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import estimate_tokens, write_carried_indexes

__all__ = [
    "BaseStore",
    "SessionTransform",
    "build_base_store",
    "copy_store",
    "read_sessions",
]

_MARKER = "bench_store.json"

SessionTransform = Callable[[list[NewEvent]], tuple[list[NewEvent], int, int]]
"""Replaces a session's events (lossy summarization): returns (events, tokens in, tokens out)."""


@dataclass(frozen=True, slots=True)
class BaseStore:
    """A built history store: where it is and what went in."""

    history: str
    path: Path
    sessions: int
    events: int
    corpus_tokens: int
    index_seq: int | None
    ingest_tokens_in: int = 0
    ingest_tokens_out: int = 0

    @property
    def db_path(self) -> Path:
        """The Event Log file."""
        return self.path / "history.db"


def read_sessions(history: History) -> list[list[NewEvent]]:
    """Return the history's events grouped by session, in chronological order."""
    if history.path is None:
        raise UsageError(
            f"the history {history.key} is not in the data (BEAM 10M ships questions only); "
            "put its chat.json beside probing_questions/ or choose another size"
        )
    importer = get_importer(history.format)
    sessions: dict[str, list[NewEvent]] = {}
    for event in importer.read(history.path, probe(history.path)):
        if isinstance(event, NewEvent):  # benchmark formats yield events only, never skips
            sessions.setdefault(event.session_id, []).append(event)
    return sorted(sessions.values(), key=lambda events: events[0].step_index or 0)


def build_base_store(
    history: History,
    store_dir: Path,
    *,
    transform: SessionTransform | None = None,
    k: int = 4,
    with_index: bool = True,
) -> BaseStore:
    """Build (or reuse) the base store of ``history`` in ``store_dir`` (see the module doc)."""
    marker = store_dir / _MARKER
    if marker.is_file():
        return _read_marker(marker, store_dir)
    if store_dir.exists():
        shutil.rmtree(store_dir)
    store_dir.mkdir(parents=True)
    counts = {"events": 0, "corpus": 0, "in": 0, "out": 0}
    sessions = read_sessions(history)
    with EventLog.open(store_dir / "history.db") as log:
        for events in sessions:
            # The corpus is the history as it happened, also when a transform replaces it:
            # a lossy store's share of "the corpus" is measured against the original.
            counts["corpus"] += sum(estimate_tokens(e.content) for e in events)
            if transform is not None:
                events, tokens_in, tokens_out = transform(events)
                counts["in"] += tokens_in
                counts["out"] += tokens_out
            counts["events"] += len(log.append_many(events))
        index_seq = None
        if with_index:
            index_seq = write_carried_indexes(log, [history.key], k=k).get(history.key)
    base = BaseStore(
        history.key,
        store_dir,
        len(sessions),
        counts["events"],
        counts["corpus"],
        index_seq,
        counts["in"],
        counts["out"],
    )
    _write_marker(marker, base)
    return base


def copy_store(base: Path, target: Path) -> Path:
    """Copy a base store (database by SQLite's backup API, payload files as files)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    source = sqlite3.connect(f"file:{base / 'history.db'}?mode=ro", uri=True)
    try:
        copy = sqlite3.connect(target / "history.db")
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()
    if (base / "payloads").is_dir():
        shutil.copytree(base / "payloads", target / "payloads")
    return target


def _write_marker(marker: Path, base: BaseStore) -> None:
    data = {**asdict(base), "path": str(base.path)}
    temporary = marker.with_suffix(".tmp")
    temporary.write_text(json.dumps(data), encoding="utf-8")
    os.replace(temporary, marker)


def _read_marker(marker: Path, store_dir: Path) -> BaseStore:
    data = json.loads(marker.read_text(encoding="utf-8"))
    data["path"] = store_dir
    return BaseStore(**data)
