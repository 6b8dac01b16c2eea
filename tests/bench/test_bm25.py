"""The BM25 baseline ranks whitespace tokens, case-folded, deterministically."""

from __future__ import annotations

from scrollctx.bench import BM25Baseline, tokenize


def test_tokenize_lowercases_and_splits_on_whitespace_only() -> None:
    assert tokenize("Where did  Caroline\tgo? It's Paris.") == [
        "where",
        "did",
        "caroline",
        "go?",
        "it's",
        "paris.",
    ]


def test_rank_puts_the_matching_document_first() -> None:
    docs = ["we had a big lunch", "the trip to paris was long", "lunch again", "nothing", "no"]
    index = BM25Baseline(docs)
    assert index.rank("Paris trip", 2)[0] == 1
    # Both lunch documents first, the shorter one ahead (BM25 length normalization).
    assert index.rank("LUNCH", 5)[:2] == [2, 0]


def test_rank_covers_every_document_and_breaks_ties_by_corpus_order() -> None:
    index = BM25Baseline(["alpha", "beta", "gamma"])
    assert index.rank("zeta", 10) == [0, 1, 2]


def test_empty_corpus_ranks_nothing() -> None:
    assert BM25Baseline([]).rank("anything", 10) == []
