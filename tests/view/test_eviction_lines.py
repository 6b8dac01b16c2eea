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
