"""The tiered index alone: roll-up bound, ordered disjoint spans, stable prefix, data round trip."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollctx.view import EvictionIndex, IndexBlock, IndexLine
from scrollctx.view._index import clip_line


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
    # 11 evictions of 4 events; with k = 4, tier 0 rolls up at the 4th, 7th and 10th.
    assert data["version"] == 1
    assert data["counters"] == {"evictions": 11, "rollups": 3, "evicted_events": 44}
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


def test_add_returns_the_roll_ups_it_did() -> None:
    # k = 3: a full tier keeps its newest block, so tier 0 rolls up at the 3rd addition and
    # then at every 2nd; tier 1 gets one block per roll-up and rolls up itself at its 3rd
    # (the 7th addition, two roll-ups at once).
    index = EvictionIndex(3, "s")
    returned = [index.add(_block(10 * i + 1, [1]), 1) for i in range(9)]
    assert returned == [0, 0, 1, 0, 1, 0, 2, 0, 1]
    assert index.counters == {"evictions": 9, "rollups": 5, "evicted_events": 9}


def test_index_lines_are_clipped_to_200_characters() -> None:
    assert clip_line("x" * 200) == "x" * 200
    assert clip_line("x" * 201) == "x" * 199 + "…"
    assert clip_line("a  b\n c") == "a b c"


def test_a_rolled_up_line_keeps_90_characters_of_its_first_and_last_text() -> None:
    # What was done, not what was asked: the request travels as an anchor instead.
    first, last = "a" * 90, "b" * 91
    request = IndexLine(1, 1, "user", "user: please", [{"seq": 1, "text": "please"}], 1)
    lines = [
        IndexLine(2, 2, "turn", first),
        IndexLine(3, 3, "turn", "x"),
        IndexLine(5, 5, "turn", last),
    ]
    rolled = IndexBlock([request, *lines]).collapse()
    assert rolled.text == first + " … " + "b" * 89 + "…"
    assert (rolled.anchors, rolled.anchor_count) == ([{"seq": 1, "text": "please"}], 1)


@pytest.mark.parametrize("count,suffix", [(2, ""), (3, " (+1 more)"), (7, " (+5 more)")])
def test_a_roll_up_says_how_many_requests_it_does_not_show(count: int, suffix: str) -> None:
    anchors = [{"seq": 1, "text": "first"}, {"seq": 9, "text": "newest"}]
    line = IndexLine(1, 9, "rollup", "did things", anchors, count)
    assert line.render().endswith(f'user asked: seq 1 "first"; seq 9 "newest"{suffix}')


def test_a_line_over_several_sessions_says_where_each_starts() -> None:
    one = [{"n": 3, "seq": 10, "date": "2024-03-05"}]
    two = [{"n": 3, "seq": 10, "date": "2024-03-05"}, {"n": 4, "seq": 14, "date": "2024-03-09"}]
    undated = [{"n": 3, "seq": 10, "date": "2024-03-05"}, {"n": 4, "seq": 14}]
    assert IndexLine(10, 12, "turn", "did", sessions=one).render() == (
        "  · seq 10-12  [Session 3 | 2024-03-05] did"
    )
    assert IndexLine(10, 16, "turn", "did", sessions=two).render() == (
        "  · seq 10-16  Sessions 3-4 (2024-03-05 … 2024-03-09): did\n"
        "      sessions start at: S3@10 S4@14"
    )
    assert (
        IndexLine(10, 16, "turn", "did", sessions=undated)
        .render()
        .startswith("  · seq 10-16  Sessions 3-4: did\n")
    )


def test_a_request_line_renders_without_an_anchor_list() -> None:
    line = IndexLine(4, 4, "user", "user: book it", [{"seq": 4, "text": "book it"}], 1)
    assert line.render() == "  · seq 4  user: book it"


def test_an_index_saved_before_a_counter_existed_loads_it_as_zero() -> None:
    index = EvictionIndex(3, "s")
    index.add(_block(1, [1]), 1)
    data = index.to_data()
    del data["counters"]["evicted_events"]
    assert EvictionIndex.from_data(data).counters == {
        "evictions": 1,
        "rollups": 0,
        "evicted_events": 0,
    }


def test_a_line_is_never_changed_once_made_and_its_data_is_a_copy() -> None:
    import dataclasses

    line = IndexLine(1, 1, "user", "user: please", [{"seq": 1, "text": "please"}], 1,
                     sessions=[{"seq": 1, "session": {"title": "a"}}])  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        line.text = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        IndexBlock([line]).lines = []  # type: ignore[misc]
    data = line.to_data()
    data["anchors"][0]["text"] = "changed"
    data["sessions"][0]["session"]["title"] = "changed"
    assert line.anchors == [{"seq": 1, "text": "please"}]
    assert line.sessions == [{"seq": 1, "session": {"title": "a"}}]
