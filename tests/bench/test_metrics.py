"""Retrieval metrics on hand-checked cases."""

from __future__ import annotations

import math

import pytest

from scrollctx.bench import (
    SectionResult,
    first_occurrences,
    mean_scores,
    metric_names,
    ndcg,
    recall_all,
    recall_any,
    reciprocal_rank,
    score_ranking,
    session_ranking,
)

RANKED = ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    ("gold", "k", "any_", "all_"),
    [
        ({"a"}, 1, 1.0, 1.0),
        ({"b"}, 1, 0.0, 0.0),
        ({"b", "e"}, 2, 1.0, 0.0),
        ({"b", "e"}, 5, 1.0, 1.0),
        ({"z"}, 5, 0.0, 0.0),
        ({"e", "z"}, 10, 1.0, 0.0),
    ],
)
def test_recall_any_and_all(gold: set[str], k: int, any_: float, all_: float) -> None:
    assert recall_any(RANKED, gold, k) == any_
    assert recall_all(RANKED, gold, k) == all_


def test_reciprocal_rank_is_one_over_the_first_gold_rank() -> None:
    assert reciprocal_rank(RANKED, {"c", "e"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, {"a"}) == 1.0
    assert reciprocal_rank(RANKED, {"z"}) == 0.0


def test_reciprocal_rank_is_not_cut_at_any_depth() -> None:
    # MRR, not MRR@10: a first hit at rank 11 or 250 still counts.
    ranked = [f"d{i}" for i in range(1, 301)]
    assert reciprocal_rank(ranked, {"d11"}) == pytest.approx(1 / 11)
    assert reciprocal_rank(ranked, {"d250", "d299"}) == pytest.approx(1 / 250)


def test_ndcg_uses_the_undiscounted_first_two_ranks() -> None:
    # Rank 1 and rank 2 carry the same weight (1 and 1/log2(2) = 1).
    assert ndcg(["x", "a"], {"a"}, 10) == 1.0
    # One gold at rank 3: DCG = 1/log2(3); IDCG = 1.
    assert ndcg(["x", "y", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    # Two gold at ranks 1 and 4: DCG = 1 + 1/2; IDCG = 1 + 1 (two leading ones).
    assert ndcg(["a", "x", "y", "b"], {"a", "b"}, 10) == pytest.approx(1.5 / 2)


def test_ndcg_ideal_is_capped_at_k() -> None:
    gold = {f"g{i}" for i in range(12)}
    ranked = sorted(gold)[:10]
    assert ndcg(ranked, gold, 10) == pytest.approx(1.0)
    # A gold id past rank k earns nothing.
    assert ndcg(["x"] * 10 + ["g0"], {"g0"}, 10) == 0.0


def test_no_gold_follows_longmemeval_conventions() -> None:
    scores = score_ranking(RANKED, set())
    assert scores["recall_any@5"] == 0.0
    assert scores["recall_all@5"] == 1.0
    assert scores["mrr"] == 0.0
    assert scores["ndcg@10"] == 0.0


def test_repeated_gold_ids_count_once() -> None:
    assert recall_all(["a", "b"], ["a", "a"], 1) == 1.0
    assert ndcg(["a", "x"], ["a", "a"], 10) == 1.0


def test_empty_ranking_scores_zero() -> None:
    scores = score_ranking([], {"a"})
    assert set(scores.values()) == {0.0}


def test_session_ranking_keeps_the_first_occurrence_of_each_session() -> None:
    session_of = {"D1:1": "1", "D1:4": "1", "D3:2": "3", "D2:7": "2", "D3:9": "3"}
    turns = ["D1:4", "D3:2", "D1:1", "D3:9", "D2:7"]
    sessions = session_ranking(turns, session_of.__getitem__)
    assert sessions == ["1", "3", "2"]
    # Without the dedup, session 2 would sit at rank 5; with it, it is at rank 3.
    assert recall_any(sessions, {"2"}, 3) == 1.0
    assert ndcg(sessions, {"1", "2"}, 10) == pytest.approx((1 + 1 / math.log2(3)) / 2)


def test_first_occurrences() -> None:
    assert first_occurrences([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_score_ranking_produces_every_metric_in_order() -> None:
    scores = score_ranking(RANKED, {"b", "d"})
    assert list(scores) == metric_names()
    assert scores == {
        "recall_any@1": 0.0,
        "recall_any@5": 1.0,
        "recall_any@10": 1.0,
        "recall_all@1": 0.0,
        "recall_all@5": 1.0,
        "recall_all@10": 1.0,
        "mrr": 0.5,
        "ndcg@10": pytest.approx((1 + 1 / math.log2(4)) / 2),
    }


def test_mean_scores_averages_key_by_key() -> None:
    rows = [{"mrr": 1.0, "x": 0.0}, {"mrr": 0.5, "x": 1.0}]
    assert mean_scores(rows) == {"mrr": 0.75, "x": 0.5}
    assert mean_scores([]) == {}
    assert mean_scores([{"mrr": 0.25}]) == {"mrr": 0.25}  # one question is its own mean


def test_differences_are_paired_per_question_and_means_by_group() -> None:
    section = SectionResult("x", groups=["a", "a", "b"], clusters=["c1", "c1", "c2"])
    section.rows = {
        "ms.search": {"turn": [{"mrr": 1.0}, {"mrr": 0.5}, {"mrr": 0.0}]},
        "bm25s": {"turn": [{"mrr": 0.5}, {"mrr": 0.5}, {"mrr": 1.0}]},
    }
    difference = section.difference("ms.search", "bm25s", "mrr")
    assert difference.mean == pytest.approx((0.5 + 0.0 - 1.0) / 3)
    assert difference.low <= difference.mean <= difference.high
    assert section.means("ms.search", "turn", "a") == {"mrr": 0.75}
