"""Weighted reciprocal-rank fusion of the BM25 and semantic rankings of ``ms.search``.

A row's fused score is ``sum over channels of weight / (K + rank)`` (rank 1-based, a channel
that did not return the row adds nothing). Rank fusion needs no calibration between BM25
scores and cosines, which live on unrelated scales and shift with every query. The weights,
``K`` and the depth of each channel's list were chosen on the development split of the
retrieval benchmark (docs/retrieval.md); ties break by the better single rank, then by seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FUSION", "Fused", "FusionWeights", "fuse"]


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """The fusion's parameters: channel weights, the rank offset K and each list's depth."""

    bm25: float
    semantic: float
    offset: int
    depth: int

    def depth_for(self, k: int) -> int:
        """Rows each channel contributes for a search of ``k`` hits."""
        return max(k, self.depth)


FUSION = FusionWeights(bm25=1.0, semantic=1.0, offset=1, depth=50)
"""The parameters ``ms.search`` uses, the best of a grid on the development split only
(``benchmarks/tune_fusion.py``; semantic weight 0.25-3, K 1-60, depth 10-100; docs/retrieval.md).
Depth 50 and 100 tied to four decimals; the cheaper one is kept. K = 1 trusts each channel's
first ranks: a row either channel puts first outranks what both put fourth."""


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused hit: its seq, score and the channels that returned it."""

    seq: int
    score: float
    channel: str
    """``"bm25"``, ``"semantic"`` or ``"both"``."""


def fuse(
    bm25: Sequence[int], semantic: Sequence[int], k: int, weights: FusionWeights = FUSION
) -> list[Fused]:
    """Fuse two rankings of seqs (best first) into the top ``k``."""
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    seen: dict[int, set[str]] = {}
    for name, ranking, weight in (
        ("bm25", bm25, weights.bm25),
        ("semantic", semantic, weights.semantic),
    ):
        for rank, seq in enumerate(ranking, start=1):
            if name in seen.setdefault(seq, set()):
                continue  # a repeat within one list counts once, at its best rank
            seen[seq].add(name)
            scores[seq] = scores.get(seq, 0.0) + weight / (weights.offset + rank)
            best[seq] = min(best.get(seq, rank), rank)
    order = sorted(scores, key=lambda s: (-scores[s], best[s], s))[:k]
    return [
        Fused(s, scores[s], "both" if len(seen[s]) == 2 else next(iter(seen[s]))) for s in order
    ]
