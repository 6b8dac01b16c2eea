"""The BM25 baseline ranks whitespace tokens, case-folded, deterministically."""

from __future__ import annotations

import pytest

from scrollctx.bench import BM25Baseline, StemmedBM25, tokenize, word_tokens
from scrollctx.errors import UsageError


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


def test_word_tokens_drop_punctuation() -> None:
    assert word_tokens("Group? It's C++ (v2).") == ["group", "it", "s", "c", "v2"]
    index = BM25Baseline(["support group", "lunch", "beach", "dog", "cat"], tokens="words")
    assert index.rank("the group?", 1) == [0]
    # The whitespace baseline keeps "group?" whole, so it finds nothing better than corpus order.
    assert BM25Baseline(["lunch", "support group", "beach", "dog"]).rank("group?", 1) == [0]


def test_unknown_tokenizer_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown BM25 tokenizer 'chars'"):
        BM25Baseline(["a"], tokens="chars")


def test_stemmed_bm25_matches_inflections_and_ignores_stop_words() -> None:
    docs = ["the support groups met", "lunch", "we walked to the beach", "a dog", "cats"]
    index = StemmedBM25(docs)
    assert index.rank("which group meets?", 1) == [0]
    assert index.rank("walking", 1) == [2]
    # Only stop words: nothing scores, so corpus order.
    assert index.rank("the of and", 3) == [0, 1, 2]
    assert StemmedBM25([]).rank("anything", 3) == []
    assert StemmedBM25(["the", "lunch"]).rank("lunch", 2) == [1, 0]
