"""The systems of the retrieval benchmark, each a function ``(question, k) -> [seq, ...]``.

Every system ranks the rows of one conversation's store; the baselines get those rows as
:class:`Turn` texts read back from the store, ``ms.search`` reads the store itself, so all rank
exactly the same rows (``evaluate_retrieval`` asserts it).

- ``ms.search`` in its default mode, and in modes ``bm25`` and ``semantic``, ``scope="task"``;
- ``rank_bm25``: ``BM25Okapi`` over whitespace tokens, LongMemEval's reference baseline;
- ``bm25s``: bm25s with a Snowball stemmer and English stop words;
- ``dense``: cosine of the query to each row's first window (its first 254 word pieces, what a
  truncating encoder sees) with the same model as ``ms.search``'s semantic channel;
- ``rrf``: reciprocal-rank fusion of ``bm25s`` and ``dense`` (K = 60, equal weights), the
  standard unweighted hybrid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scrollctx.bench._bm25 import BM25Baseline, StemmedBM25
from scrollctx.surface import Encoder, MemorySurface

__all__ = ["BASELINES", "OURS", "Ranker", "Turn", "baseline_rankers", "surface_rankers"]

Ranker = Callable[[str, int], list[int]]
OURS: tuple[str, ...] = ("ms.search", "ms.search bm25", "ms.search semantic")
"""``ms.search`` in its default mode first, then in each single channel."""
BASELINES: tuple[str, ...] = ("rank_bm25", "bm25s", "dense", "rrf")
RRF_K = 60


@dataclass(frozen=True, slots=True)
class Turn:
    """One ingested row as the evaluation sees it."""

    seq: int
    turn_id: str
    session: str
    text: str


class PartialCounter:
    """Counts ``ms.search`` results a budget cut short."""

    def __init__(self) -> None:
        self.partial = 0


def surface_rankers(
    ms: MemorySurface, counter: PartialCounter, *, semantic: bool
) -> dict[str, Ranker]:
    """Return the ``ms.search`` systems (only the BM25 mode when ``semantic`` is off)."""

    def ranker(mode: str | None) -> Ranker:
        def rank(question: str, k: int) -> list[int]:
            hits = ms.search(question, k=k, scope="task", mode=mode)
            counter.partial += bool(hits.partial)
            return [int(hit["seq"]) for hit in hits]

        return rank

    if not semantic:
        return {"ms.search bm25": ranker("bm25")}
    return {
        "ms.search": ranker(None),
        "ms.search bm25": ranker("bm25"),
        "ms.search semantic": ranker("semantic"),
    }


def baseline_rankers(turns: Sequence[Turn], encoder: Encoder | None) -> dict[str, Ranker]:
    """Return the baselines over ``turns`` (the lexical ones only when ``encoder`` is None)."""
    seqs = [t.seq for t in turns]
    texts = [t.text for t in turns]
    lexical = BM25Baseline(texts)
    stemmed = StemmedBM25(texts)
    rankers: dict[str, Ranker] = {
        "rank_bm25": lambda q, k: [seqs[i] for i in lexical.rank(q, k)],
        "bm25s": lambda q, k: [seqs[i] for i in stemmed.rank(q, k)],
    }
    if encoder is None:
        return rankers
    dense = _DenseIndex(texts, encoder)
    rankers["dense"] = lambda q, k: [seqs[i] for i in dense.rank(q, k)]
    rankers["rrf"] = lambda q, k: [
        seqs[i] for i in rrf([stemmed.rank(q, len(seqs)), dense.rank(q, len(seqs))], k)
    ]
    return rankers


def rrf(rankings: Sequence[Sequence[int]], k: int, offset: int = RRF_K) -> list[int]:
    """Fuse full rankings of document indexes with unweighted reciprocal ranks."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (offset + rank)
    return sorted(scores, key=lambda d: (-scores[d], d))[:k]


class _DenseIndex:
    """Brute-force cosine over each text's first window."""

    def __init__(self, texts: Sequence[str], encoder: Encoder) -> None:
        import numpy as np

        self._np: Any = np
        self._encoder = encoder
        firsts = [windows[0] if windows else [] for windows in encoder.windows_many(texts)]
        self._matrix = encoder.encode_windows(firsts) if firsts else np.zeros((0, encoder.dim))

    def rank(self, query: str, k: int) -> list[int]:
        np = self._np
        if not len(self._matrix):
            return []
        scores = self._matrix @ self._encoder.encode_query(query)
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [int(i) for i in order[:k]]
