"""Lexical baselines: ``rank_bm25.BM25Okapi`` over whitespace tokens (LongMemEval's reference)
and ``bm25s`` with a Snowball English stemmer and English stop words (the strong one).

Tokens (``whitespace``, the default) are the lower-cased text split on whitespace; punctuation
stays attached to words, as in the LongMemEval baseline (which does not lower-case; we do, so
``Paris`` in a question matches ``paris`` in a turn, the way FTS5's ``unicode61`` folds case).
The ``words`` tokenizer (lower-cased runs of letters and digits) is a stronger lexical
reference: ``group?`` then matches ``group``. Parameters are the library defaults (k1 = 1.5,
b = 0.75, epsilon = 0.25). Every document is ranked, best first; ties keep corpus order, so a
ranking is deterministic.

:class:`StemmedBM25` is what a skilled user would reach for first: ``bm25s`` (its default
Lucene BM25 variant, k1 = 1.5, b = 0.75) over ``bm25s.tokenize`` tokens -- lower-cased words,
English stop words dropped, each word stemmed by PyStemmer's Snowball ``english`` stemmer --
with the same deterministic ordering (score, then corpus order).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from scrollctx.errors import MissingDependency, UsageError

__all__ = ["TOKENIZERS", "BM25Baseline", "StemmedBM25", "tokenize", "word_tokens"]

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


class StemmedBM25:
    """A ``bm25s`` index with Snowball stemming and English stop words over one conversation.

    Example: ``StemmedBM25(["the groups met", "lunch"]).rank("which group meets?", 1)`` -> ``[0]``
    """

    def __init__(self, documents: Sequence[str]) -> None:
        try:
            import bm25s
            import Stemmer
        except ImportError as exc:
            raise MissingDependency(exc.name or "bm25s", "bench") from exc
        self._bm25s: Any = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self._size = len(documents)
        self._index: Any = None
        if documents:
            self._index = bm25s.BM25()
            self._index.index(self._tokens(documents), show_progress=False)

    def rank(self, query: str, k: int) -> list[int]:
        """Return the indexes of the ``k`` best documents for ``query``, best first."""
        if self._index is None:
            return []
        [terms] = self._tokens([query])
        known = [t for t in terms if t in self._index.vocab_dict]
        scores = self._index.get_scores(known) if known else [0.0] * self._size
        order = sorted(range(self._size), key=lambda i: (-float(scores[i]), i))
        return order[:k]

    def _tokens(self, texts: Sequence[str]) -> list[list[str]]:
        return list(
            self._bm25s.tokenize(
                list(texts),
                stopwords="en",
                stemmer=self._stemmer,
                return_ids=False,
                show_progress=False,
            )
        )
