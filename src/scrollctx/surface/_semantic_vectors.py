"""The semantic channel's reader: a model's vectors held in memory and ranked against a query.

A row's score is the mean cosine of its windows: on the development split (BEAM 100K chats 1-7)
the mean beat the best window (a long answer's code or boilerplate window often sits close to
any question) and the first window alone, so every window counts and none dominates
(docs/retrieval.md). The mean of dot products is the dot product with the mean, so the index
keeps one float32 vector per row, the mean of its windows, and scores a query with one product
over rows instead of windows (2.7 times fewer on the all-BEAM store). The matrix is read once
over the guarded ``hist`` connection, a slice of seqs at a time (never the whole store's BLOBs
at once), and topped up by seq as the store grows (checked on every search: one indexed lookup
of the model's mark); a row's windows always arrive together, since the mark passes whole rows.
Filters are the same SQL condition the BM25 passes use, evaluated on the log table first
(skipped when there is none), so both channels rank exactly the rows the filters let through.

The product runs on one BLAS thread: it is memory-bound (92 MB for the all-BEAM store), and
OpenBLAS's second thread kept spinning after each product, taking a core from the BM25 half of
a hybrid search (hybrid p95 28.8 ms with one thread against 47.8 ms, load 2; same scores bit
for bit, docs/retrieval.md). Inside the memory reader's sandbox threadpoolctl cannot scan the
loaded libraries; there the product keeps numpy's default threads.

numpy and threadpoolctl are imported when an index is built, never at module import.
"""

from __future__ import annotations

import contextlib
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
_COUNT_SQL = (
    "SELECT count(DISTINCT seq) FROM hist.conversation_embeddings WHERE model = ? AND seq > ? "
    "AND seq <= ?"
)
_SLICE_SEQS = 4096
"""Rows' seqs read per statement while loading: bounds the BLOBs held at once."""
_ALLOWED_SQL = "SELECT c.seq FROM hist.conversation_history AS c WHERE c.searchable = 1 AND {}"


@dataclass(frozen=True, slots=True)
class VectorState:
    """How far the store's vectors reach: ``through_seq`` of ``last_seq`` rows, ``dim`` wide."""

    through_seq: int
    last_seq: int
    dim: int = 0

    @property
    def is_empty(self) -> bool:
        """No row has been embedded with this model."""
        return self.through_seq == 0

    @property
    def behind(self) -> int:
        """Rows (by seq) newer than the vectors."""
        return max(0, self.last_seq - self.through_seq)


class VectorIndex:
    """One model's vectors over one store, ranked by mean window cosine to a query vector."""

    def __init__(self, conn: sqlite3.Connection, model: str) -> None:
        import numpy
        from threadpoolctl import ThreadpoolController

        self._np: Any = numpy
        try:
            self._blas: Any = ThreadpoolController()
        except OSError:  # the memory reader's sandbox denies its scan of loaded libraries
            self._blas = None
        self._conn = conn
        self._model = model
        self._loaded_through = 0
        self._means = numpy.zeros((0, 0), dtype=numpy.float32)
        self._row_seqs = numpy.zeros(0, dtype=numpy.int64)

    def refresh(self, state: VectorState) -> None:
        """Read the vectors of rows past what is loaded, up to the mark (none: nothing new).

        This and :meth:`allowed` read the store, so they run on the surface's own thread;
        :meth:`rank` only computes and may run on another.
        """
        self._refresh(state.through_seq, state.dim)

    def allowed(self, filters: Filters) -> Any:
        """Return the seqs ``filters`` let through (None: every row)."""
        if filters.sql == "1":
            return None
        sql = _ALLOWED_SQL.format(filters.sql)
        seqs = [row[0] for row in self._conn.execute(sql, filters.params)]
        return self._np.array(seqs, dtype=self._np.int64)

    def rank(self, query: Any, allowed: Any, k: int) -> list[tuple[int, float]]:
        """Return up to ``k`` ``(seq, cosine)`` of the allowed rows, best first."""
        np = self._np
        means, row_seqs = self._means, self._row_seqs
        if not len(row_seqs):
            return []
        one_thread = self._blas and self._blas.limit(limits=1, user_api="blas")
        with one_thread or contextlib.nullcontext():
            scores = means @ query.astype(np.float32)
        if allowed is not None:
            scores = np.where(np.isin(row_seqs, allowed), scores, -np.inf)
        take = min(k, int(np.isfinite(scores).sum()))
        if take == 0:
            return []
        top = np.argpartition(-scores, take - 1)[:take]
        # Ties break by seq (older first), so a ranking is deterministic.
        top = top[np.lexsort((row_seqs[top], -scores[top]))]
        return [(int(row_seqs[i]), float(scores[i])) for i in top]

    def _refresh(self, through: int, dim: int) -> None:
        """Append the mean vectors of the rows in ``(loaded, through]``, slice by slice."""
        if through <= self._loaded_through:
            return
        np = self._np
        start = self._loaded_through
        (count,) = self._conn.execute(_COUNT_SQL, (self._model, start, through)).fetchone()
        if count:
            filled = len(self._row_seqs)
            means = np.empty((filled + count, dim), dtype=np.float32)
            seqs = np.empty(filled + count, dtype=np.int64)
            if filled:
                means[:filled] = self._means
                seqs[:filled] = self._row_seqs
            for low in range(start, through, _SLICE_SEQS):
                filled = self._read_slice(low, min(low + _SLICE_SEQS, through), means, seqs, filled)
            self._means, self._row_seqs = means[:filled], seqs[:filled]
        self._loaded_through = through

    def _read_slice(self, low: int, high: int, means: Any, seqs: Any, filled: int) -> int:
        """Write the mean vectors of rows ``(low, high]`` at ``filled``; return the new fill."""
        np = self._np
        window_seqs: list[int] = []
        blobs: list[bytes] = []
        for seq, blob in self._conn.execute(_LOAD_SQL, (self._model, low, high)):
            window_seqs.append(seq)
            blobs.append(blob)
        if not blobs:
            return filled
        windows = np.frombuffer(b"".join(blobs), dtype="<f2").reshape(len(blobs), -1)
        owner = np.array(window_seqs, dtype=np.int64)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(owner)) + 1])
        sizes = np.diff(np.append(starts, len(owner)))
        end = filled + len(starts)
        sums = means[filled:end]
        sums[:] = windows[starts]
        # Window j of every row that has one, added in one step (a row has few windows;
        # np.add.reduceat over rows was five times slower).
        for j in range(1, int(sizes.max())):
            longer = np.flatnonzero(sizes > j)
            sums[longer] += windows[starts[longer] + j]
        sums /= sizes[:, None].astype(np.float32)
        seqs[filled:end] = owner[starts]
        return end


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
        if mark is None:
            return VectorState(0, int(last[0] or 0))
        return VectorState(int(mark[1]), int(last[0] or 0), int(mark[0]))

    def index(self) -> VectorIndex:
        """Return the in-memory index (built on first call; needs the ``semantic`` extra)."""
        if self._index is None:
            try:
                self._index = VectorIndex(self._conn, self.model)
            except ImportError as exc:
                from scrollctx.errors import MissingDependency

                raise MissingDependency(exc.name or "numpy", "semantic") from exc
        return self._index
