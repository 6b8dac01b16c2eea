"""The query language compiles any text into FTS5 that FTS5 accepts."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollctx.surface import or_terms
from scrollctx.surface._query import MAX_QUERY_CHARS, parse_query


def _and(query: str) -> str | None:
    return parse_query(query).and_expression()


def test_bare_terms_are_and_combined() -> None:
    assert _and("pamela vendor") == '"pamela" AND "vendor"'


def test_or_binds_tighter_than_and() -> None:
    assert _and("Pamela didn't OR wasn't OR never") == (
        '"Pamela" AND ("didn\'t" OR "wasn\'t" OR "never")'
    )


def test_explicit_and_equals_space() -> None:
    assert _and("pamela AND vendor") == _and("pamela vendor")


def test_not_excludes_a_clause() -> None:
    assert _and("pamela NOT vendor") == '("pamela") NOT "vendor"'


def test_phrase_and_prefix() -> None:
    assert _and('"red car" rout*') == '"red car" AND "rout"*'


def test_lowercase_operators_are_words() -> None:
    assert _and("cats or dogs") == '"cats" AND "dogs"'  # "or" is a stopword, dropped
    assert parse_query("cats or dogs").or_terms()[0].text == "cats"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("OR", '"OR"'),
        ("OR vendor", '"vendor"'),  # the leading OR is the stopword "or"
        ("vendor OR", '"vendor"'),
        ("NOT", '"NOT"'),
        ("NOT vendor", '"vendor"'),  # nothing to subtract from: literal "not" (stopword)
        ("a OR OR b", '("OR" OR "b")'),
    ],
)
def test_operators_without_operands_are_literal(query: str, expected: str) -> None:
    assert _and(query) == expected


def test_quotes_inside_terms_are_doubled_and_punctuation_stays_literal() -> None:
    parsed = parse_query('C++ a:b NEAR(x) "unbalanced')
    assert parsed.and_expression() == '"C++" AND "a:b" AND "NEAR(x)" AND "unbalanced"'


def test_stopwords_are_dropped_from_and_and_from_or_terms() -> None:
    parsed = parse_query("What did I say about the vendor's price?")
    assert parsed.and_expression() == '"vendor\'s" AND "price?"'
    assert [t.text for t in parsed.or_terms()] == ["vendor", "price"]


def test_only_stopwords_are_still_searched() -> None:
    assert _and("what is it") == '"what" AND "is" AND "it"'


def test_symbols_only_leave_nothing_to_search() -> None:
    assert parse_query("🙂 -- :: ()").is_empty
    assert parse_query("").is_empty


def test_overlong_query_is_cut_with_a_note() -> None:
    parsed = parse_query("word " * 3000)
    assert parsed.notes and str(MAX_QUERY_CHARS) in parsed.notes[0]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(prose, code, headline, tokenize='porter unicode61')"
    )
    conn.execute("INSERT INTO t VALUES ('didn''t say C++ or NEAR things', 'x = 1', 'h')")
    return conn


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=80)
    | st.lists(
        st.sampled_from(
            [
                "OR",
                "AND",
                "NOT",
                "NEAR",
                '"',
                "*",
                "(",
                ")",
                ":",
                "-",
                "^",
                "+",
                "didn't",
                "C++",
                "x*",
                '"a b"',
                "🙂",
                "\x00",
                "col:x",
                "{a b}",
                "say",
            ]
        ),
        max_size=12,
    ).map(" ".join)
)
def test_any_text_compiles_to_fts5_that_runs(fts: sqlite3.Connection, query: str) -> None:
    parsed = parse_query(query)
    for expression in (parsed.and_expression(), parsed.or_expression()):
        if expression is not None:
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_or_terms_quotes_what_needs_it() -> None:
    assert or_terms(["road trip", "itinerary", "map*", "didn't", "OR"]) == (
        '"road trip" OR itinerary OR map* OR "didn\'t" OR "OR"'
    )
    assert or_terms("solo") == "solo"
    assert or_terms([]) == ""


def test_or_terms_output_parses_as_one_or_group() -> None:
    parsed = parse_query(or_terms(["road trip", "tolls"]))
    assert parsed.and_expression() == '("road trip" OR "tolls")'


def test_first_person_words_are_search_terms() -> None:
    parsed = parse_query("What is my sprint deadline?")
    assert parsed.and_expression() == '"my" AND "sprint" AND "deadline?"'
    assert [t.text for t in parsed.or_terms()] == ["my", "sprint", "deadline"]
