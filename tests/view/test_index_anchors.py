"""Real user requests survive roll-ups: each rolled-up line keeps its span's first and newest
request, and counts every request beneath it (derived here from the blocks that were added)."""

from __future__ import annotations

from scrollctx.view import EvictionIndex, IndexBlock, IndexLine


def _block(lo: int, requests: list[int]) -> IndexBlock:
    lines = []
    for seq in range(lo, lo + 4):
        if seq in requests:
            text = f"request at {seq}"
            lines.append(
                IndexLine(seq, seq, "user", f"user: {text}", [{"seq": seq, "text": text}], 1)
            )
        else:
            lines.append(IndexLine(seq, seq, "turn", f"⟦ step {seq} | ok | next | done ⟧"))
    return IndexBlock(lines)


def test_rolled_up_lines_keep_first_and_newest_request_and_count_all() -> None:
    index = EvictionIndex(3, "s")
    requests: list[int] = []
    for n in range(12):
        lo = 1 + 4 * n
        mine = [lo, lo + 2]  # two requests per evicted span
        requests += mine
        index.add(_block(lo, mine), 4)

    lines = [line for tier in index.tiers for block in tier for line in block.lines]
    assert sum(line.anchor_count for line in lines) == len(requests)
    rollups = [line for line in lines if line.kind == "rollup"]
    assert rollups, "12 evictions with k=3 must have rolled up"
    for line in rollups:
        inside = [seq for seq in requests if line.lo <= seq <= line.hi]
        assert line.anchor_count == len(inside)
        kept = [anchor["seq"] for anchor in line.anchors]
        assert kept == [inside[0], inside[-1]], (line.lo, line.hi, kept)
