"""Choose the terms of the broadened (OR) pass from their document frequencies.

BM25 over an OR of every content word is the quality baseline, but its cost grows with the
rows each word matches: on a 60k-row store a question containing ``user`` (in every user turn's
``[Session n | date] user:`` tag) scores half the store. Two rules keep the pass lean:

1. Terms in more than half of the rows are dropped. FTS5's bm25 clamps their IDF to ~0, so the
   ranking does not change (exact), only the work does. Stores under 100 rows skip this rule.
2. If the remaining terms still match more than :data:`CANDIDATE_POSTINGS` rows in total, the
   rarest terms up to that budget pick the candidate rows and every remaining term still scores
   them (``(rare OR …) AND (all OR …)``). A row holding only common words can then be missed;
   that is the price of a bounded latency, paid only on large stores.

Document frequencies come from ``count(*)`` MATCH queries, cached per surface until the store
grows by more than 5%.
"""

from __future__ import annotations

import itertools
import sqlite3

from scrollctx.surface._query import ParsedQuery, Term

__all__ = ["CANDIDATE_POSTINGS", "TermStats", "broad_expression"]

CANDIDATE_POSTINGS = 6000
"""The most (term, row) matches the OR pass scores before it restricts its candidates."""

_MIN_ROWS_FOR_PRUNING = 100

_COUNT_SQL = (
    "SELECT count(*) FROM hist.conversation_history_fts WHERE conversation_history_fts MATCH ?"
)


class TermStats:
    """Document frequencies of query terms over the whole full-text index, cached."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._df: dict[str, int] = {}
        self._rows_at_fill = 0

    def rows(self) -> int:
        """Return the number of rows in the store (max seq: cheap, and close enough)."""
        row = self._conn.execute("SELECT max(seq) FROM hist.conversation_history").fetchone()
        rows = int(row[0] or 0)
        if rows > self._rows_at_fill * 1.05:
            self._df = {}  # a new dict, not cleared: one remembered earlier stays as it was
            self._rows_at_fill = rows
        return rows

    def remembered(self) -> tuple[dict[str, int], int, int]:
        """What the cache holds, without copying it (to put it back: :meth:`recall`): counts
        are only ever added to a dict, in order (a refill starts a new one), so the dict and
        its length then say which were there."""
        return self._df, len(self._df), self._rows_at_fill

    def recall(self, remembered: tuple[dict[str, int], int, int]) -> None:
        """Put back what :meth:`remembered` returned: as if the calls since had not run."""
        counts, kept, self._rows_at_fill = remembered
        for key in list(itertools.islice(counts, kept, None)):
            del counts[key]
        self._df = counts

    def df(self, term: Term) -> int:
        """Return how many rows match ``term``."""
        key = term.fts()
        if key not in self._df:
            self._df[key] = int(self._conn.execute(_COUNT_SQL, (key,)).fetchone()[0])
        return self._df[key]


def broad_expression(parsed: ParsedQuery, stats: TermStats) -> str | None:
    """Return the MATCH expression of the OR pass (``None`` when nothing is left to search)."""
    terms = parsed.or_terms()
    if len(terms) <= 1:
        return parsed.or_expression(terms)
    rows = stats.rows()
    counted = sorted(((stats.df(t), t) for t in terms), key=lambda pair: pair[0])
    present = [(df, t) for df, t in counted if df > 0]
    if not present:
        return parsed.or_expression(terms)
    if rows >= _MIN_ROWS_FOR_PRUNING:
        present = [(df, t) for df, t in present if df <= rows / 2] or present[:1]
    scored = [t for _, t in present]
    picked: list[Term] = []
    total = 0
    for df, term in present:
        if picked and total + df > CANDIDATE_POSTINGS:
            return parsed.restricted_or_expression(picked, scored)
        picked.append(term)
        total += df
    return parsed.or_expression(scored)
