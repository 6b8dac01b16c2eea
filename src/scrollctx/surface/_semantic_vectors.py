"""The semantic channel's reader: a model's vectors held in memory and ranked against a query.

The vectors are read once over the guarded ``hist`` connection into one float32 matrix (windows
in seq order), then topped up by seq as the store grows (checked on every search: one indexed
lookup of the model's mark). A row's score is the mean cosine of its windows: on the development
split (BEAM 100K chats 1-7) the mean beat the best window (a long answer's code or boilerplate
window often sits close to any question) and the first window alone, so every window counts
and none dominates (docs/retrieval.md). Filters are the
same SQL condition the BM25 passes use, evaluated on the log table first (skipped when there
is none), so both channels rank exactly the rows the filters let through.

numpy is imported when an index is built, never at module import.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from scrollctx.surface._filters import Filters

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["BEHIND_NOTE", "NO_VECTORS_NOTE", "SemanticChannel", "VectorIndex", "VectorState"]

T = TypeVar("T")
_MARK_SQL = "SELECT dim, through_seq FROM hist.embedding_models WHERE model = ?"
_LOAD_SQL = (
    "SELECT seq, vector FROM hist.conversation_embeddings WHERE model = ? AND seq > ? "
    "AND seq <= ? ORDER BY seq, window"
)
_ALLOWED_SQL = "SELECT c.seq FROM hist.conversation_history AS c WHERE c.searchable = 1 AND {}"


@dataclass(frozen=True, slots=True)
class VectorState:
    """How far the store's vectors reach: ``through_seq`` of ``last_seq`` rows."""

    through_seq: int
    last_seq: int

    @property
    def is_empty(self) -> bool:
        """No row has been embedded with this model."""
        return self.through_seq == 0

    @property
    def behind(self) -> int:
        """Rows (by seq) newer than the vectors."""
        return max(0, self.last_seq - self.through_seq)


class VectorIndex:
    """One model's vectors over one store, ranked by cosine to a query vector."""

    def __init__(self, conn: sqlite3.Connection, model: str) -> None:
        import numpy

        self._np: Any = numpy
        self._conn = conn
        self._model = model
        self._loaded_through = 0
        self._window_seqs = numpy.zeros(0, dtype=numpy.int64)
        self._matrix = numpy.zeros((0, 0), dtype=numpy.float32)
        self._row_starts = numpy.zeros(0, dtype=numpy.int64)
        self._row_seqs = numpy.zeros(0, dtype=numpy.int64)
        self._row_sizes = numpy.zeros(0, dtype=numpy.float32)

    def prepare(self, filters: Filters, state: VectorState) -> Any:
        """Load vectors up to the mark; return the seqs ``filters`` allow (None: every row).

        This is the part that reads the store, so it runs on the surface's own thread;
        :meth:`rank` only computes and may run on another.
        """
        self._refresh(state.through_seq)
        return None if filters.sql == "1" else self._allowed(filters)

    def rank(self, query: Any, allowed: Any, k: int) -> list[tuple[int, float]]:
        """Return up to ``k`` ``(seq, cosine)`` of the allowed rows, best first."""
        np = self._np
        matrix, row_starts, row_seqs = self._matrix, self._row_starts, self._row_seqs
        if not len(row_seqs):
            return []
        scores = np.add.reduceat(matrix @ query.astype(np.float32), row_starts) / self._row_sizes
        if allowed is not None:
            scores = np.where(np.isin(row_seqs, allowed), scores, -np.inf)
        take = min(k, int(np.isfinite(scores).sum()))
        if take == 0:
            return []
        top = np.argpartition(-scores, take - 1)[:take]
        # Ties break by seq (older first), so a ranking is deterministic.
        top = top[np.lexsort((row_seqs[top], -scores[top]))]
        return [(int(row_seqs[i]), float(scores[i])) for i in top]

    def _allowed(self, filters: Filters) -> Any:
        sql = _ALLOWED_SQL.format(filters.sql)
        seqs = [row[0] for row in self._conn.execute(sql, filters.params)]
        return self._np.array(seqs, dtype=self._np.int64)

    def _refresh(self, through: int) -> None:
        if through <= self._loaded_through:
            return
        np = self._np
        seqs: list[int] = []
        blobs: list[bytes] = []
        for seq, blob in self._conn.execute(
            _LOAD_SQL, (self._model, self._loaded_through, through)
        ):
            seqs.append(seq)
            blobs.append(blob)
        if blobs:
            fresh = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), -1)
            fresh = fresh.astype(np.float32)
            matrix = fresh if not self._matrix.size else np.concatenate([self._matrix, fresh])
            self._matrix = matrix
            self._window_seqs = np.concatenate([self._window_seqs, np.array(seqs, dtype=np.int64)])
            change = np.flatnonzero(np.diff(self._window_seqs)) + 1
            self._row_starts = np.concatenate([[0], change]).astype(np.int64)
            self._row_seqs = self._window_seqs[self._row_starts]
            ends = np.append(self._row_starts[1:], len(self._window_seqs))
            self._row_sizes = (ends - self._row_starts).astype(np.float32)
        self._loaded_through = through


NO_VECTORS_NOTE = (
    "this store has no vectors for semantic search ({model}); these are BM25 results -- "
    "run `scroll embed` on the store to add them"
)
BEHIND_NOTE = (
    "semantic search covers rows up to seq {through}; the {behind} newer rows are found by "
    "BM25 only until `scroll embed` runs again"
)


class SemanticChannel:
    """The surface's door to the vectors and the query encoder, both loaded on first use."""

    def __init__(self, conn: sqlite3.Connection, model: str) -> None:
        self._conn = conn
        self.model = model
        self._index: VectorIndex | None = None
        self._worker: ThreadPoolExecutor | None = None

    def in_background(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the channel's one worker thread (started on first use).

        Hybrid search encodes the query and scans the vectors there while BM25 runs in
        SQLite on the caller's thread: both release the GIL, so on two cores the two channels
        cost about the slower one instead of their sum.
        """
        if self._worker is None:
            from concurrent.futures import ThreadPoolExecutor

            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ms-semantic")
        return self._worker.submit(work)

    def close(self) -> None:
        """Stop the worker thread, if one was started."""
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None

    def state(self) -> VectorState:
        """Read how far the vectors reach (no numpy needed; a pre-vector store has none)."""
        try:
            mark = self._conn.execute(_MARK_SQL, (self.model,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            mark = None
        last = self._conn.execute("SELECT max(seq) FROM hist.conversation_history").fetchone()
        return VectorState(int(mark[1]) if mark else 0, int(last[0] or 0))

    def index(self) -> VectorIndex:
        """Return the in-memory index (built on first call; needs the ``semantic`` extra)."""
        if self._index is None:
            try:
                self._index = VectorIndex(self._conn, self.model)
            except ImportError as exc:
                from scrollctx.errors import MissingDependency

                raise MissingDependency("numpy", "semantic") from exc
        return self._index
