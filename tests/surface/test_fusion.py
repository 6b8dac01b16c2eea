"""Weighted reciprocal-rank fusion on hand-made rankings."""

from __future__ import annotations

import pytest

from scrollctx.surface._fusion import FUSION, FusionWeights, fuse


def test_a_row_both_channels_rank_beats_rows_only_one_ranks() -> None:
    fused = fuse([1, 2, 3], [4, 2, 5], 5, FusionWeights(1.0, 1.0, 60, 50))
    assert [f.seq for f in fused][0] == 2
    assert {f.seq: f.channel for f in fused} == {
        2: "both", 1: "bm25", 4: "semantic", 3: "bm25", 5: "semantic"
    }  # fmt: skip


def test_scores_are_weighted_reciprocal_ranks() -> None:
    weights = FusionWeights(bm25=2.0, semantic=0.5, offset=10, depth=50)
    fused = {f.seq: f.score for f in fuse([7, 8], [8], 2, weights)}
    assert fused[7] == pytest.approx(2.0 / 11)
    assert fused[8] == pytest.approx(2.0 / 12 + 0.5 / 11)


def test_weights_decide_between_the_channels_tops() -> None:
    lexical_heavy = FusionWeights(bm25=1.0, semantic=0.2, offset=60, depth=50)
    semantic_heavy = FusionWeights(bm25=0.2, semantic=1.0, offset=60, depth=50)
    assert fuse([1], [2], 1, lexical_heavy)[0].seq == 1
    assert fuse([1], [2], 1, semantic_heavy)[0].seq == 2


def test_ties_break_by_best_single_rank_then_seq_and_repeats_count_once() -> None:
    even = FusionWeights(1.0, 1.0, 60, 50)
    # 5 and 9 both sit at rank 1 of one list: equal scores, equal best rank -> lower seq first.
    assert [f.seq for f in fuse([9], [5], 2, even)] == [5, 9]
    # A seq repeated within a list counts once, at its first rank.
    assert fuse([3, 3, 4], [], 3, even)[0].score == pytest.approx(1 / 61)
    assert [f.seq for f in fuse([3, 3, 4], [], 3, even)] == [3, 4]


def test_k_cuts_and_empty_lists_fuse_to_nothing() -> None:
    assert fuse([], [], 10) == []
    assert len(fuse(list(range(1, 30)), list(range(30, 60)), 7)) == 7


def test_depth_never_below_k() -> None:
    assert FUSION.depth_for(1) == FUSION.depth
    assert FUSION.depth_for(FUSION.depth + 40) == FUSION.depth + 40
