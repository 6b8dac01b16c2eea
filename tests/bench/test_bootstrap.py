"""Paired bootstrap intervals, clustered by conversation, reproducible from their seed."""

from __future__ import annotations

import pytest

from scrollctx.bench import paired_interval


def test_identical_systems_have_a_zero_interval() -> None:
    interval = paired_interval([1, 0, 1, 0], [1, 0, 1, 0], ["a", "a", "b", "b"])
    assert (interval.mean, interval.low, interval.high) == (0.0, 0.0, 0.0)
    assert not interval.excludes_zero


def test_a_constant_gain_in_every_conversation_excludes_zero() -> None:
    a = [1.0] * 10
    b = [0.0, 1.0] * 5
    interval = paired_interval(a, b, [f"c{i // 2}" for i in range(10)])
    assert interval.mean == pytest.approx(0.5)
    assert interval.low == interval.high == pytest.approx(0.5) and interval.excludes_zero


def test_clusters_widen_the_interval_and_runs_reproduce() -> None:
    # All the gain sits in one of four conversations: resampling conversations sees that.
    a = [1.0] * 5 + [0.0] * 15
    b = [0.0] * 20
    clustered = paired_interval(a, b, ["c1"] * 5 + ["c2"] * 5 + ["c3"] * 5 + ["c4"] * 5)
    per_question = paired_interval(a, b, [f"q{i}" for i in range(20)])
    assert clustered.mean == per_question.mean == pytest.approx(0.25)
    assert clustered.high - clustered.low > per_question.high - per_question.low
    assert clustered.low == 0.0  # a replicate without c1 gains nothing
    assert paired_interval(a, b, ["c1"] * 5 + ["c2"] * 15) == paired_interval(
        a, b, ["c1"] * 5 + ["c2"] * 15
    )


def test_mismatched_inputs_are_refused() -> None:
    message = "paired_interval needs equally long, non-empty score lists"
    with pytest.raises(ValueError, match=message):
        paired_interval([1.0], [1.0, 0.0], ["a"])
    with pytest.raises(ValueError, match=message):
        paired_interval([], [], [])
