"""The BM25 baseline: ``rank_bm25.BM25Okapi`` over whitespace tokens, as in LongMemEval.

Tokens are the lower-cased text split on whitespace; punctuation stays attached to words, as in
the LongMemEval baseline (which does not lower-case; we do, so ``Paris`` in a question matches
``paris`` in a turn, the way FTS5's ``unicode61`` folds case). Parameters are the library
defaults (k1 = 1.5, b = 0.75, epsilon = 0.25). Every document is ranked, best first; ties keep
corpus order, so a ranking is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scrollctx.errors import MissingDependency

__all__ = ["BM25Baseline", "tokenize"]


def tokenize(text: str) -> list[str]:
    """Split ``text`` into the baseline's tokens: lower-cased, split on whitespace."""
    return text.lower().split()


class BM25Baseline:
    """A BM25Okapi index over one conversation's turn texts.

    Example: ``BM25Baseline(["we met in Paris", "lunch"]).rank("where did we meet", 1)`` -> ``[0]``
    """

    def __init__(self, documents: Sequence[str]) -> None:
        try:
            from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]
        except ImportError as exc:
            raise MissingDependency("rank_bm25", "bench") from exc
        # BM25Okapi divides by the corpus size; an empty conversation has nothing to rank.
        self._size = len(documents)
        self._index: Any = BM25Okapi([tokenize(d) for d in documents]) if documents else None

    def rank(self, query: str, k: int) -> list[int]:
        """Return the indexes of the ``k`` best documents for ``query``, best first."""
        if self._index is None:
            return []
        scores = self._index.get_scores(tokenize(query))
        order = sorted(range(self._size), key=lambda i: (-float(scores[i]), i))
        return order[:k]
