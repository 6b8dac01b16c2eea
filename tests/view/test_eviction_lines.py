"""The index lines one eviction writes: a line per group, each request one anchor."""

from __future__ import annotations

from typing import Any

from scrollctx.view._eviction import build_block, group_turns
from scrollctx.view._turns import Turn


def _turn(role: str, seq: int, text: str, **fields: Any) -> Turn:
    return Turn(role=role, text=text, source="test", seq=seq, **fields)


def test_each_request_is_one_anchor_and_an_exchange_names_its_calls() -> None:
    call = {"type": "call", "id": "c1", "name": "search", "args": {"q": "invoice"}}
    turns = [
        _turn("user", 1, "find the invoice"),
        _turn("assistant", 2, "", label="Looking.", blocks=[call]),
        _turn("tool", 3, "found it", tool_call_id="c1", tool_name="search"),
        _turn("user", 4, "thanks"),
    ]
    block = build_block(turns, group_turns(turns))
    assert [(line.lo, line.hi, line.kind, line.text) for line in block.lines] == [
        (1, 1, "user", "user: find the invoice"),
        (2, 3, "turn", "Looking. [called search({'q': 'invoice'}); 1 result(s)]"),
        (4, 4, "user", "user: thanks"),
    ]
    requests = [(line.anchors, line.anchor_count) for line in block.lines if line.kind == "user"]
    assert requests == [
        ([{"seq": 1, "text": "find the invoice"}], 1),
        ([{"seq": 4, "text": "thanks"}], 1),
    ]
    assert block.collapse().anchor_count == 2  # a roll-up counts the two requests


def test_a_large_eviction_merges_neighbouring_lines_keeping_every_request() -> None:
    # Nine groups, at most eight lines: groups are merged two by two (the last stays alone),
    # each merged line naming its first and last text and keeping both requests.
    turns = [_turn("user", seq, f"request {seq}") for seq in range(1, 10)]
    block = build_block(turns, group_turns(turns))
    assert [(line.lo, line.hi, line.text) for line in block.lines] == [
        (1, 2, "user: request 1 … user: request 2"),
        (3, 4, "user: request 3 … user: request 4"),
        (5, 6, "user: request 5 … user: request 6"),
        (7, 8, "user: request 7 … user: request 8"),
        (9, 9, "user: request 9"),
    ]
    assert [anchor["seq"] for line in block.lines for anchor in line.anchors] == list(range(1, 10))
    assert [line.anchor_count for line in block.lines] == [2, 2, 2, 2, 1]
