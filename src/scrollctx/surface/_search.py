"""Full-text search over ``hist``: a strict AND pass, then a BM25-ranked OR pass to fill up to k.

Ranking is FTS5 ``bm25`` with column weights prose 1, code 0.5, headline 2: a fenced code block
counts half (long and repetitive), a headline (the model's own summary of the turn) double.
These weights were chosen on the retrieval benchmark (``scroll bench retrieval``): prose-heavy
weights such as 10/0.5/5 lost about 0.05 recall@5 on BEAM, whose turns mix prose and code.
The OR pass (only when the AND pass found fewer than k rows) searches the query's content terms
(stopwords dropped; see ``_broaden`` for how common terms are handled), so long
natural-language questions still reach BM25-ranked rows. For a query of plain words the AND
hits and the OR rows are then ordered together by the OR pass's BM25 (no AND hit is dropped):
a row holding every word of a long question is not better than one saying much more about
its rarest words (on BEAM 100K/500K: MRR +0.007/+0.005, recall_all@5 +0.000/+0.005
over putting the AND hits first).
With explicit operators, phrases or prefixes the AND hits come first, as the query asked.
Rows only the OR pass found carry ``broadened=True``.

Without FTS5 in the store, search degrades to LIKE over the content and every result says so.
Invariant: no query text ever raises; a budget that cuts the search leaves ``partial=True`` and a
note.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, replace
from typing import Any

from scrollctx.errors import MissingDependency, QueryError
from scrollctx.surface._broaden import TermStats, broad_expression
from scrollctx.surface._filters import Filters
from scrollctx.surface._fusion import FUSION, fuse
from scrollctx.surface._guard import BudgetExceeded, Deadline
from scrollctx.surface._query import ParsedQuery, Term, parse_query
from scrollctx.surface._rows import Budgets, ResultRows, as_dict, load_json, row_bytes, shorten
from scrollctx.surface._semantic_model import MODEL_NAME, load_encoder
from scrollctx.surface._semantic_vectors import (
    BEHIND_NOTE,
    NO_VECTORS_NOTE,
    SemanticChannel,
    VectorIndex,
)

__all__ = ["BM25_WEIGHTS", "DEFAULT_MODE", "LIKE_NOTE", "MODES", "SearchOptions", "Searcher"]

MODES = ("bm25", "semantic", "hybrid")
DEFAULT_MODE = "hybrid"
"""The mode of ``ms.search`` when none is given: on the development split hybrid beat both
single channels on LoCoMo and on BEAM 100K (docs/retrieval.md, ``benchmarks/tune_fusion.py``)."""

BM25_WEIGHTS = (1.0, 0.5, 2.0)
"""bm25() column weights for (prose, code, headline)."""

SNIPPET_TOKENS = 40

LIKE_NOTE = (
    "search degraded to LIKE: this store has no FTS5 index, so matching is plain substring "
    "(no stemming, no BM25; ranked by terms matched, then newest) -- prefer one or two "
    "distinctive words per search"
)

_COLUMNS = """
    c.seq, c.session_id, c.agent_id, c.task_id, c.step_index, c.msg_index, c.kind, c.role,
    c.name, c.created_at,
    COALESCE(json_extract(c.metadata, '$.date'), substr(c.created_at, 1, 10)) AS date,
    COALESCE(c.headline, c.label) AS headline, c.content, c.metadata
"""
_FTS_SQL = """
SELECT {columns}, {snippet} AS snippet
FROM hist.conversation_history_fts
CROSS JOIN hist.conversation_history AS c ON c.seq = conversation_history_fts.rowid
WHERE conversation_history_fts MATCH ?
  AND conversation_history_fts.rank MATCH 'bm25({weights})'
  AND {filters}
ORDER BY conversation_history_fts.rank
LIMIT ?
"""
_NEWEST_SQL = (
    "SELECT {columns}, '' AS snippet FROM hist.conversation_history AS c "
    "WHERE c.searchable = 1 AND {filters} ORDER BY c.seq DESC LIMIT ?"
)
_LIKE_SQL = """
SELECT {columns}, '' AS snippet, ({score}) AS matched
FROM hist.conversation_history AS c
WHERE c.searchable = 1 AND ({condition}) AND {filters}
ORDER BY matched DESC, c.seq DESC
LIMIT ?
"""
_EDGE_PUNCT = "?!.,;:()[]{}'\"`"


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """How to shape each hit."""

    k: int
    snippet: bool
    chars: int | None
    mode: str | None = None
    """``bm25``, ``semantic`` or ``hybrid``; None: :data:`DEFAULT_MODE` on a store with
    vectors, BM25 on one without; quietly BM25 when the semantic extra is missing (an
    explicit mode raises :class:`MissingDependency` instead)."""


class _FtsRejected(Exception):
    """FTS5 refused a compiled expression (should not happen; we then retry more simply)."""


class Searcher:
    """Runs searches on the guarded connection under the surface's budgets."""

    def __init__(
        self, conn: sqlite3.Connection, deadline: Deadline, budgets: Budgets, has_fts5: bool
    ) -> None:
        self._conn = conn
        self._deadline = deadline
        self._budgets = budgets
        self.term_stats = TermStats(conn)
        """Cached term counts the OR pass prunes by: state that outlives a call."""
        self._semantic = SemanticChannel(conn, MODEL_NAME)
        self.has_fts5 = has_fts5

    def search(self, query: object, filters: Filters, options: SearchOptions) -> ResultRows:
        """Search and return shaped hits (see ``MemorySurface.search``)."""
        result = ResultRows()
        parsed = parse_query(query)
        for text in parsed.notes:
            result.note(text)
        options = self._check_k(options, result)
        mode = options.mode or DEFAULT_MODE
        # Loading the encoder and the vectors (once per surface, then a top-up as the store
        # grows) is not this query's cost: it runs before the per-call time budget starts.
        index = None if mode == "bm25" or parsed.is_empty else self._vectors(options, result)
        with self._deadline.running(self._budgets.seconds):
            try:
                raw = self._ranked(query, parsed, filters, options, result, index)
            except BudgetExceeded:
                raw = []
                result.note(self._time_note("search"), partial=True)
        self._shape(raw, options, result, _snippet_words(parsed))
        return result

    def _check_k(self, options: SearchOptions, result: ResultRows) -> SearchOptions:
        k = options.k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise QueryError(f"k must be a positive integer, e.g. k=10; got {k!r}")
        if options.chars is not None and (
            isinstance(options.chars, bool)
            or not isinstance(options.chars, int)
            or options.chars < 0
        ):
            raise QueryError(f"chars must be a non-negative integer or None; got {options.chars!r}")
        if k > self._budgets.rows:
            result.note(
                f"k={k} is above the {self._budgets.rows}-row budget; returning at most "
                f"{self._budgets.rows} -- narrow with kind=, session_id= or seq_range=",
                partial=True,
            )
            return replace(options, k=self._budgets.rows)
        if options.mode is not None and options.mode not in MODES:
            raise QueryError(
                f"mode must be one of {', '.join(map(repr, MODES))}; got {options.mode!r}"
            )
        return options

    # -- channels ------------------------------------------------------------------------------

    def _ranked(
        self,
        query: object,
        parsed: ParsedQuery,
        filters: Filters,
        options: SearchOptions,
        result: ResultRows,
        index: VectorIndex | None,
    ) -> list[dict[str, Any]]:
        if index is None:
            return _tagged(self._passes(parsed, filters, options, result), "bm25")
        mode = options.mode or DEFAULT_MODE
        allowed = index.allowed(filters)
        text = str(query)
        depth = FUSION.depth_for(options.k) if mode == "hybrid" else options.k

        def nearest() -> list[int]:
            vector = load_encoder().encode_query(text)
            return [seq for seq, _ in index.rank(vector, allowed, depth)]

        if mode == "semantic":
            return _tagged(self._rows_at(nearest()), "semantic")
        pending = self._semantic.in_background(nearest)
        # With snippets for all `depth` rows: making them afterwards for the shown rows only
        # costs more, since FTS5 must evaluate the MATCH expressions again (docs/retrieval.md).
        lexical = self._passes(parsed, filters, replace(options, k=depth), result)
        semantic = pending.result()
        by_seq = {row["seq"]: row for row in lexical}
        fused = fuse([row["seq"] for row in lexical], semantic, options.k)
        by_seq |= {
            row["seq"]: row for row in self._rows_at([f.seq for f in fused if f.seq not in by_seq])
        }
        return [by_seq[f.seq] | {"channel": f.channel} for f in fused]

    def close(self) -> None:
        """Stop the semantic channel's worker thread (the connection is the surface's)."""
        self._semantic.close()

    def _vectors(self, options: SearchOptions, result: ResultRows) -> VectorIndex | None:
        """Return the index, loaded up to the mark, or None (with a note) when BM25 stands in."""
        state = self._semantic.state()
        if state.is_empty:
            # The default answers quietly by BM25 where vectors are missing (every hit says
            # channel='bm25'); an explicit semantic or hybrid request is told why. Rows newer
            # than the vectors (an agent's own fresh turns) are treated the same way.
            if options.mode is not None:
                result.note(NO_VECTORS_NOTE.format(model=MODEL_NAME))
            return None
        try:
            index = self._semantic.index()
            load_encoder()
        except MissingDependency as exc:
            if options.mode is not None:
                raise
            result.note(f"semantic search is unavailable ({exc}); these are BM25 results")
            return None
        if state.behind and options.mode is not None:
            result.note(BEHIND_NOTE.format(through=state.through_seq, behind=state.behind))
        index.refresh(state)
        return index

    def _rows_at(self, seqs: list[int]) -> list[dict[str, Any]]:
        """Fetch hit rows by seq, in the order given (no snippet: _shape makes one)."""
        if not seqs:
            return []
        sql = (
            f"SELECT {_COLUMNS}, '' AS snippet FROM hist.conversation_history AS c "
            "WHERE c.seq IN (SELECT value FROM json_each(?))"
        )
        rows = self._fetch(
            sql, ("[" + ",".join(map(str, seqs)) + "]",), len(seqs), set(), ResultRows()
        )
        by_seq = {row["seq"]: row for row in rows}
        return [by_seq[seq] for seq in seqs if seq in by_seq]

    def _passes(
        self, parsed: ParsedQuery, filters: Filters, options: SearchOptions, result: ResultRows
    ) -> list[dict[str, Any]]:
        if not self.has_fts5:
            result.note(LIKE_NOTE)
            return self._like_passes(parsed, filters, options.k, result)
        if parsed.is_empty:
            result.note(
                "the query has no searchable words; these are the newest rows that "
                "match the filters"
            )
            sql = _NEWEST_SQL.format(columns=_COLUMNS, filters=filters.sql)
            return self._fetch(sql, (*filters.params, options.k), options.k, set(), result)
        try:
            return self._fts_passes(parsed, filters, options, result)
        except _FtsRejected:
            result.note("the query could not be run as full-text search; fell back to LIKE")
            return self._like_passes(parsed, filters, options.k, result)

    def _fts_passes(
        self, parsed: ParsedQuery, filters: Filters, options: SearchOptions, result: ResultRows
    ) -> list[dict[str, Any]]:
        strict = parsed.and_expression()
        hits = self._fts(strict, filters, options, set(), result) if strict else []
        if len(hits) >= options.k:
            return hits
        # Plain words are ranked together with the OR pass (a row holding every word is not
        # better than a row saying more about the rarest ones); explicit operators, phrases
        # and prefixes state intent, so their strict hits stay on top.
        exclude = set() if parsed.is_plain else {row["seq"] for row in hits}
        wide = SearchOptions(options.k + len(hits), options.snippet, options.chars)
        try:
            broad = self._broad(parsed)
            if broad is None or broad == strict:
                return hits
            extra = self._fts(broad, filters, wide if parsed.is_plain else options, exclude, result)
        except BudgetExceeded:
            result.note(self._time_note("the broadened (OR) pass of search"), partial=True)
            extra = []
        if parsed.is_plain:
            return _merge(hits, extra, options.k)
        for row in extra:
            row["broadened"] = True
        return hits + extra[: options.k - len(hits)]

    def _broad(self, parsed: ParsedQuery) -> str | None:
        try:
            return broad_expression(parsed, self.term_stats)
        except sqlite3.OperationalError as exc:
            if self._deadline.expired:
                raise BudgetExceeded from None
            raise _FtsRejected(str(exc)) from exc

    def _fts(
        self,
        expression: str,
        filters: Filters,
        options: SearchOptions,
        exclude: set[int],
        result: ResultRows,
    ) -> list[dict[str, Any]]:
        snippet = (
            f"snippet(conversation_history_fts, 0, '«', '»', ' … ', {SNIPPET_TOKENS})"
            if options.snippet
            else "''"
        )
        sql = _FTS_SQL.format(
            columns=_COLUMNS,
            snippet=snippet,
            weights=", ".join(str(w) for w in BM25_WEIGHTS),
            filters=filters.sql,
        )
        limit = options.k + len(exclude)
        try:
            return self._fetch(
                sql, (expression, *filters.params, limit), options.k, exclude, result
            )
        except sqlite3.OperationalError as exc:
            raise _FtsRejected(str(exc)) from exc

    def _like_passes(
        self, parsed: ParsedQuery, filters: Filters, k: int, result: ResultRows
    ) -> list[dict[str, Any]]:
        strict = [_like_patterns(c.terms) for c in parsed.and_clauses()]
        hits = self._like(strict, filters, k, set(), result, require_all=True) if strict else []
        loose = [[p] for p in _like_patterns(parsed.or_terms())]
        if len(hits) >= k or not loose:
            return hits
        extra = self._like(loose, filters, k, {r["seq"] for r in hits}, result, require_all=False)
        for row in extra:
            row["broadened"] = True
        return hits + extra[: k - len(hits)]

    def _like(
        self,
        groups: list[list[str]],
        filters: Filters,
        k: int,
        exclude: set[int],
        result: ResultRows,
        *,
        require_all: bool,
    ) -> list[dict[str, Any]]:
        text = "(c.content || ' ' || COALESCE(c.headline, ''))"
        tests = ["(" + " OR ".join(f"{text} LIKE ? ESCAPE '\\'" for _ in g) + ")" for g in groups]
        params = [p for g in groups for p in g]
        sql = _LIKE_SQL.format(
            columns=_COLUMNS,
            score=" + ".join(tests),
            condition=(" AND " if require_all else " OR ").join(tests),
            filters=filters.sql,
        )
        args = (*params, *params, *filters.params, k + len(exclude))
        return self._fetch(sql, args, k, exclude, result)

    def _fetch(
        self,
        sql: str,
        params: tuple[Any, ...],
        k: int,
        exclude: set[int],
        result: ResultRows,
    ) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        try:
            cursor = self._conn.execute(sql, params)
            for values in cursor:
                row = as_dict(cursor, values)
                if row["seq"] not in exclude:
                    rows.append(row)
                if len(rows) >= k:
                    break
        except sqlite3.OperationalError:
            if self._deadline.expired:
                raise BudgetExceeded from None
            raise
        return rows

    def _shape(
        self,
        raw: list[dict[str, Any]],
        options: SearchOptions,
        result: ResultRows,
        words: list[str],
    ) -> None:
        used = 0
        for row in raw:
            row.pop("matched", None)
            row["metadata"] = load_json(row["metadata"]) or {}
            full = row["content"] or ""
            row["content"] = shorten(full, options.chars, row["seq"])
            if not options.snippet:
                row["snippet"] = ""
            elif not row["snippet"]:
                lexical = self.has_fts5 and row["channel"] != "semantic"
                row["snippet"] = "" if lexical else _window(full, words)
            row.setdefault("broadened", False)
            used += row_bytes(row)
            if used > self._budgets.bytes:
                result.note(
                    f"search stopped at {len(result)} hits: the {self._budgets.bytes}-byte "
                    "budget ran out -- lower chars= (e.g. chars=300) or k=",
                    partial=True,
                )
                return
            result.append(row)

    def _time_note(self, what: str) -> str:
        return (
            f"{what} ran past the {self._budgets.seconds:g}s time budget; results are partial "
            "-- use fewer or rarer terms, or narrow with kind=, session_id= or seq_range="
        )


def _tagged(rows: list[dict[str, Any]], channel: str) -> list[dict[str, Any]]:
    for row in rows:
        row["channel"] = channel
    return rows


def _like_patterns(terms: list[Term]) -> list[str]:
    patterns = []
    for term in terms:
        text = term.text.strip(_EDGE_PUNCT) if term.kind == "word" else term.text
        text = text or term.text
        patterns.append("%" + re.sub(r"([\\%_])", r"\\\1", text) + "%")
    return patterns


def _merge(
    strict: list[dict[str, Any]], ranked: list[dict[str, Any]], k: int
) -> list[dict[str, Any]]:
    """Order by the OR pass's BM25 rank; every strict hit stays, OR-only rows are broadened."""
    strict_seqs = {row["seq"] for row in strict}
    ranked_seqs = {row["seq"] for row in ranked}
    merged = [row for row in ranked if row["seq"] not in strict_seqs]
    for row in merged:
        row["broadened"] = True
    by_seq = {row["seq"]: row for row in strict}
    order = [by_seq.get(row["seq"], row) for row in ranked]
    order += [row for row in strict if row["seq"] not in ranked_seqs]
    surplus = len(order) - k
    kept: list[dict[str, Any]] = []
    for row in reversed(order):  # drop broadened rows from the tail until k are left
        if surplus > 0 and row["seq"] not in strict_seqs:
            surplus -= 1
            continue
        kept.append(row)
    return kept[::-1]


def _snippet_words(parsed: ParsedQuery) -> list[str]:
    return [
        term.text.strip(_EDGE_PUNCT).lower() if term.kind == "word" else term.text.lower()
        for clause in parsed.positives
        for term in clause.terms
    ]


def _window(text: str, words: list[str], width: int = 200) -> str:
    """A LIKE-mode snippet: ``width`` chars around the first matched word, words in «»."""
    lower = text.lower()
    found = [(lower.find(w), w) for w in words if w and w in lower]
    start = max(0, min(found)[0] - width // 3) if found else 0
    piece = text[start : start + width]
    if found:
        alternatives = sorted({re.escape(w) for _, w in found}, key=len, reverse=True)
        piece = re.sub(f"(?i)({'|'.join(alternatives)})", r"«\1»", piece)
    head = "…" if start else ""
    tail = "…" if start + width < len(text) else ""
    return head + " ".join(piece.split()) + tail
