"""The BM25 baseline: ``rank_bm25.BM25Okapi`` over whitespace tokens, as in LongMemEval.

Tokens (``whitespace``, the default) are the lower-cased text split on whitespace; punctuation
stays attached to words, as in the LongMemEval baseline (which does not lower-case; we do, so
``Paris`` in a question matches ``paris`` in a turn, the way FTS5's ``unicode61`` folds case).
The ``words`` tokenizer (lower-cased runs of letters and digits) is a stronger lexical
reference: ``group?`` then matches ``group``. Parameters are the library defaults (k1 = 1.5,
b = 0.75, epsilon = 0.25). Every document is ranked, best first; ties keep corpus order, so a
ranking is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from scrollctx.errors import MissingDependency, UsageError

__all__ = ["TOKENIZERS", "BM25Baseline", "tokenize", "word_tokens"]

_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into the baseline's tokens: lower-cased, split on whitespace."""
    return text.lower().split()


def word_tokens(text: str) -> list[str]:
    """Split ``text`` into lower-cased runs of letters and digits (punctuation dropped)."""
    return _WORD.findall(text.lower())


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"whitespace": tokenize, "words": word_tokens}
"""Baseline tokenizers by name; ``whitespace`` is the LongMemEval baseline's."""


class BM25Baseline:
    """A BM25Okapi index over one conversation's turn texts.

    Example: ``BM25Baseline(["we met in Paris", "lunch"]).rank("where did we meet", 1)`` -> ``[0]``
    """

    def __init__(self, documents: Sequence[str], *, tokens: str = "whitespace") -> None:
        if tokens not in TOKENIZERS:
            raise UsageError(
                f"unknown BM25 tokenizer {tokens!r}; choose from {', '.join(TOKENIZERS)}"
            )
        self._tokenize = TOKENIZERS[tokens]
        try:
            from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]
        except ImportError as exc:
            raise MissingDependency("rank_bm25", "bench") from exc
        # BM25Okapi divides by the corpus size; an empty conversation has nothing to rank.
        self._size = len(documents)
        self._index: Any = BM25Okapi([self._tokenize(d) for d in documents]) if documents else None

    def rank(self, query: str, k: int) -> list[int]:
        """Return the indexes of the ``k`` best documents for ``query``, best first."""
        if self._index is None:
            return []
        scores = self._index.get_scores(self._tokenize(query))
        order = sorted(range(self._size), key=lambda i: (-float(scores[i]), i))
        return order[:k]
