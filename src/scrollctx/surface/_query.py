"""The ``ms.search`` query language: a tokenizer that compiles any text into a safe FTS5 MATCH.

Grammar (everything not listed is literal text, never a syntax error):

- bare terms are AND-combined: ``pamela vendor``;
- uppercase ``OR`` joins neighbouring terms into one group, and binds tighter than AND:
  ``pamela didn't OR wasn't`` means ``pamela AND (didn't OR wasn't)``;
- uppercase ``AND`` is the same as a space; uppercase ``NOT x`` excludes rows matching ``x``;
- ``"an exact phrase"``; ``prefix*``.

An operator with no term on the side it needs (leading, trailing, doubled, alone) is a literal
word. Each term is emitted as an FTS5 string (double quotes doubled), so punctuation such as
``C++``, ``didn't``, ``a:b``, ``NEAR`` or ``(x)`` is tokenized by FTS5 itself and can never
reach the FTS5 parser as syntax. Control characters are removed first.

Invariant: :func:`parse_query` never raises, whatever the input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["STOPWORDS", "Clause", "ParsedQuery", "Term", "or_terms", "parse_query"]

MAX_QUERY_CHARS = 4000
"""Longer queries are cut here (a note says so); FTS5 cost grows with every term."""

MAX_OR_TERMS = 64
"""The broadened (OR) pass uses at most this many distinct content terms."""

TermKind = Literal["word", "phrase", "prefix"]

_OPERATORS = frozenset({"OR", "AND", "NOT"})
_WORD = re.compile(r"[^\W_]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've
    if in into is isn't it it's its itself let's more most mustn't no nor not of off
    on once only or other ought our ours ourselves out over own same shan't she she'd she'll
    she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until
    up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves also just can could may might must shall will
    would s t d ll m re ve tell said say says ever
    """.split()
)
"""English function words dropped from AND clauses and from the broadened pass.

First-person words (me, my, mine, myself) are deliberately not in the list: in a conversation
store a question about "my" plan is answered in the user's own words, and these words tip BM25
towards them. On BEAM 100K/500K keeping them raised turn recall_all@5 by 0.009/0.000 and MRR by
0.026/0.015 (``scroll bench retrieval``); LoCoMo, asked in the third person, is unchanged."""


@dataclass(frozen=True, slots=True)
class Term:
    """One literal search term: a word chunk, a quoted phrase, or a prefix."""

    text: str
    kind: TermKind = "word"

    def fts(self) -> str:
        """Return the term as an FTS5 string, safe against every FTS5 operator."""
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.kind == "prefix" else quoted

    def words(self) -> list[str]:
        """Return the term's word pieces, lowercased."""
        return [w.lower() for w in _WORD.findall(self.text)]

    @property
    def is_stopword(self) -> bool:
        """Whether this is a bare word chunk made only of function words."""
        if self.kind != "word":
            return False
        pieces = self.words()
        return bool(pieces) and (
            self.text.lower().strip("?!.,;:") in STOPWORDS or all(p in STOPWORDS for p in pieces)
        )


@dataclass(slots=True)
class Clause:
    """An OR-group of terms; a negated clause excludes rows."""

    terms: list[Term]
    negated: bool = False

    def fts(self) -> str:
        """Return the clause as an FTS5 expression."""
        if len(self.terms) == 1:
            return self.terms[0].fts()
        return "(" + " OR ".join(t.fts() for t in self.terms) + ")"


@dataclass(slots=True)
class ParsedQuery:
    """A query split into clauses, ready to compile for the AND pass and the OR pass."""

    clauses: list[Clause] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    has_operators: bool = False
    """Whether OR / AND / NOT acted as an operator."""

    @property
    def is_plain(self) -> bool:
        """Whether the query is only bare words (no operator, phrase or prefix)."""
        return not self.has_operators and all(
            t.kind == "word" for c in self.clauses for t in c.terms
        )

    @property
    def positives(self) -> list[Clause]:
        """The clauses a row must (AND pass) or may (OR pass) match."""
        return [c for c in self.clauses if not c.negated]

    @property
    def negatives(self) -> list[Clause]:
        """The clauses a row must not match."""
        return [c for c in self.clauses if c.negated]

    @property
    def is_empty(self) -> bool:
        """Whether no searchable term is left."""
        return not self.positives

    def and_clauses(self) -> list[Clause]:
        """Positive clauses minus lone stopwords (unless only stopwords are left)."""
        kept = [c for c in self.positives if not (len(c.terms) == 1 and c.terms[0].is_stopword)]
        return kept or self.positives

    def or_terms(self) -> list[Term]:
        """Distinct content terms of the positive clauses, for the broadened pass."""
        seen: dict[str, Term] = {}
        for clause in self.positives:
            for term in clause.terms:
                for piece in _content_pieces(term):
                    seen.setdefault(piece.fts().lower(), piece)
        return list(seen.values())[:MAX_OR_TERMS]

    def and_expression(self) -> str | None:
        """Compile the strict pass: every positive clause, minus the negated ones."""
        clauses = self.and_clauses()
        if not clauses:
            return None
        return self._with_negatives(" AND ".join(c.fts() for c in clauses))

    def or_expression(self, terms: list[Term] | None = None) -> str | None:
        """Compile the broadened pass: any content term, minus the negated clauses."""
        terms = self.or_terms() if terms is None else terms
        if not terms:
            return None
        return self._with_negatives(" OR ".join(t.fts() for t in terms))

    def restricted_or_expression(self, candidates: list[Term], scored: list[Term]) -> str:
        """Compile an OR pass whose rows must hold a ``candidates`` term, scored on ``scored``.

        Every phrase of the expression counts in bm25, so ``scored`` terms still rank the rows
        (candidate terms count twice, which favours the rarer, more specific words).
        """
        pick = " OR ".join(t.fts() for t in candidates)
        every = " OR ".join(t.fts() for t in scored)
        return self._with_negatives(f"({pick}) AND ({every})")

    def _with_negatives(self, expression: str) -> str:
        for clause in self.negatives:
            expression = f"({expression}) NOT {clause.fts()}"
        return expression


def _content_pieces(term: Term) -> list[Term]:
    if term.kind != "word":
        return [term]
    return [Term(w) for w in term.words() if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def _lex(text: str) -> list[Term | str]:
    """Split text into terms and operator names (``"OR"``, ``"AND"``, ``"NOT"``)."""
    tokens: list[Term | str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            end = text.find('"', i + 1)
            if end < 0:  # an unbalanced quote is literal: skip it, lex the rest normally
                i += 1
                continue
            inner = " ".join(text[i + 1 : end].split())
            if _WORD.search(inner):
                tokens.append(Term(inner, "phrase"))
            i = end + 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] != '"':
                j += 1
            tokens.extend(_chunk(text[i:j]))
            i = j
    return tokens


def _chunk(chunk: str) -> list[Term | str]:
    if chunk in _OPERATORS:
        return [chunk]
    if not _WORD.search(chunk):
        return []  # pure punctuation or symbols: nothing FTS5 would index
    stem = chunk.rstrip("*")
    if stem != chunk and stem and _WORD.fullmatch(stem[-1]):
        return [Term(stem, "prefix")]
    return [Term(chunk)]


def parse_query(query: object) -> ParsedQuery:
    """Parse any query text into clauses; never raises."""
    text = "" if query is None else str(query)
    parsed = ParsedQuery()
    if len(text) > MAX_QUERY_CHARS:
        parsed.notes.append(
            f"query was {len(text)} chars; only the first {MAX_QUERY_CHARS} were searched"
        )
        text = text[:MAX_QUERY_CHARS]
    tokens = _lex(_CONTROL.sub(" ", text))
    parsed.has_operators = _build_clauses(tokens, parsed.clauses)
    if parsed.clauses and not parsed.positives:
        # NOT needs something to subtract from; alone it is the literal word.
        parsed.clauses.insert(0, Clause([Term("NOT")]))
        for clause in parsed.clauses:
            clause.negated = False
    return parsed


def _build_clauses(tokens: list[Term | str], clauses: list[Clause]) -> bool:
    """Fill ``clauses``; return whether any operator acted as one."""
    negate_next = False
    join_or = False
    used_operator = False
    for i, token in enumerate(tokens):
        next_is_term = i + 1 < len(tokens) and isinstance(tokens[i + 1], Term)
        if isinstance(token, str):
            if token == "NOT" and next_is_term:
                negate_next = used_operator = True
                continue
            if token in ("OR", "AND") and next_is_term and clauses and not negate_next:
                join_or = token == "OR"
                used_operator = True
                continue
            token = Term(token)  # an operator with nothing to operate on is a word
        if join_or:
            clauses[-1].terms.append(token)
            join_or = False
        else:
            clauses.append(Clause([token], negated=negate_next))
            negate_next = False
    return used_operator


def or_terms(terms: Iterable[object] | str) -> str:
    """Join terms into one OR query, quoting multi-word or punctuated terms as phrases.

    Example: ``ms.search(or_terms(["road trip", "itinerary", "map*"]))`` searches
    ``"road trip" OR itinerary OR map*``.
    """
    items = [terms] if isinstance(terms, str) else list(terms)
    parts: list[str] = []
    for item in items:
        text = " ".join(str(item).replace('"', " ").split())
        if not text:
            continue
        raw = str(item).strip()
        if raw.startswith('"') and raw.endswith('"') and len(raw) > 1:
            parts.append(f'"{text}"')
        elif re.fullmatch(r"[^\W_]+\*?", text) and text not in _OPERATORS:
            parts.append(text)
        else:
            parts.append(f'"{text}"')
    return " OR ".join(parts)
