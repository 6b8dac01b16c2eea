"""The tiered index alone: roll-up bound, ordered disjoint spans, stable prefix, data round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollctx.view import EvictionIndex, IndexBlock, IndexLine


def _block(lo: int, widths: list[int], user_every: int = 3) -> IndexBlock:
    lines = []
    for position, width in enumerate(widths):
        hi = lo + width - 1
        if position % user_every == 0:
            text = f"request at {lo}"
            lines.append(IndexLine(lo, hi, "user", f"user: {text}", [{"seq": lo, "text": text}], 1))
        else:
            lines.append(IndexLine(lo, hi, "turn", f"⟦ step {lo} | ok | next | done ⟧"))
        lo = hi + 2  # a gap: seqs of other sessions or index events lie between
    return IndexBlock(lines)


def bound(k: int, n: int) -> int:
    return (k - 1) * (math.ceil(math.log(max(n, 1), k - 1)) + 1) if n > 1 else 1


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(min_value=3, max_value=6),
    sizes=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=5), min_size=1, max_size=120),
)
def test_spans_stay_ordered_and_the_block_count_logarithmic(k: int, sizes: list[list[int]]) -> None:
    index = EvictionIndex(k, "s")
    covered: set[int] = set()
    lo = 1
    for n, widths in enumerate(sizes, start=1):
        block = _block(lo, widths)
        covered |= {s for line in block.lines for s in range(line.lo, line.hi + 1)}
        before = index.render()
        rolled = index.add(block, sum(widths))
        after = index.render()
        if rolled == 0 and before:
            assert after == before + "\n" + block.render()
        spans = index.spans()
        assert all(a_hi < b_lo for (_, a_hi), (b_lo, _) in zip(spans, spans[1:], strict=False))
        assert all(s_lo <= s_hi for s_lo, s_hi in spans)
        assert all(len(tier) < k for tier in index.tiers)
        assert index.block_count() <= bound(k, n)
        lo = block.hi + 3
    inside = {s for s_lo, s_hi in index.spans() for s in range(s_lo, s_hi + 1)}
    assert covered <= inside
    assert min(inside) == min(covered) and max(inside) == max(covered)
    assert index.counters["evictions"] == len(sizes)


def test_rolled_up_lines_keep_the_anchors_and_their_count() -> None:
    index = EvictionIndex(3, "s")
    lo = 1
    for _ in range(9):
        block = _block(lo, [1, 2, 1, 1], user_every=2)
        index.add(block, 5)
        lo = block.hi + 1
    top = index.tiers[-1][0].lines[0]
    assert top.kind == "rollup"
    # Each block spans 8 seqs with requests at lo and lo + 5; the top line rolls up the first
    # two blocks (seqs 1-16), so it counts four requests (1, 6, 9, 14) and keeps the first and
    # the newest of them.
    assert (top.lo, top.hi) == (1, 16)
    assert top.anchor_count == 4
    assert [anchor["seq"] for anchor in top.anchors] == [1, 14]
    assert 'user asked: seq 1 "request at 1"; seq 14 "request at 14" (+2 more)' in top.render()


def test_data_round_trip_renders_identically() -> None:
    index = EvictionIndex(4, "s")
    lo = 1
    for _ in range(11):
        block = _block(lo, [1, 3])
        index.add(block, 4)
        lo = block.hi + 1
    data = index.to_data({"live_from": lo, "pinned": [], "folded": []})
    again = EvictionIndex.from_data(data)
    assert again.render() == index.render()
    assert again.to_data() == index.to_data()
    assert data["view_state"]["live_from"] == lo
    line = data["tiers"][0]["blocks"][-1]["lines"][0]
    assert set(line) == {"lo", "hi", "kind", "text", "anchors", "anchor_count"}


def test_render_tells_the_model_how_to_recover() -> None:
    index = EvictionIndex(4, "s")
    assert index.render() == ""
    index.add(_block(10, [2]), 2)
    text = index.render()
    assert "ms.expand(lo, hi)" in text and "ms.search(" in text
    assert "seq 10-11" in text and "user: request at 10" in text


@pytest.mark.parametrize("k,n", [(3, 1000), (4, 2000), (8, 2000)])
def test_block_count_after_many_evictions(k: int, n: int) -> None:
    index = EvictionIndex(k, "s")
    for i in range(n):
        index.add(_block(3 * i + 1, [1, 1]), 2)
    assert index.block_count() <= bound(k, n)
    assert len(index.tiers) <= math.ceil(math.log(n, k - 1)) + 1
