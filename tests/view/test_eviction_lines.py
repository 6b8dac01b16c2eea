"""The index lines one eviction writes: a line per group, each request one anchor."""

from __future__ import annotations

from typing import Any

from scrollctx.view._eviction import (
    active_start,
    build_block,
    fold_stub,
    group_turns,
    protected_suffix,
)
from scrollctx.view._turns import Turn


def _turn(role: str, seq: int, text: str, **fields: Any) -> Turn:
    return Turn(role=role, text=text, source="test", seq=seq, **fields)


def test_each_request_is_one_anchor_and_an_exchange_names_its_calls() -> None:
    call = {"type": "call", "id": "c1", "name": "search", "args": {"q": "invoice " * 10}}
    again = {"type": "call", "id": "c2", "name": "search", "args": {"q": "bill"}}
    turns = [
        _turn("user", 1, "find the invoice"),
        _turn("assistant", 2, "", label="Looking.", blocks=[call, again]),
        _turn("tool", 3, "found it", tool_call_id="c1", tool_name="search"),
        _turn("tool", 4, "nothing", tool_call_id="c2", tool_name="search"),
        _turn("user", 5, "thanks"),
    ]
    block = build_block(turns, group_turns(turns))
    assert [(line.lo, line.hi, line.kind, line.text) for line in block.lines] == [
        (1, 1, "user", "user: find the invoice"),
        # the call's arguments shown up to 60 characters
        (
            2,
            4,
            "turn",
            f"Looking. [called search({str(call['args'])[:60]}), search({{'q': 'bill'}}); "
            "2 result(s)]",
        ),
        (5, 5, "user", "user: thanks"),
    ]
    requests = [(line.anchors, line.anchor_count) for line in block.lines if line.kind == "user"]
    assert requests == [
        ([{"seq": 1, "text": "find the invoice"}], 1),
        ([{"seq": 5, "text": "thanks"}], 1),
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
    # Eight groups fit: one line each, requests staying request lines.
    turns = [_turn("user", seq, f"request {seq}") for seq in range(1, 9)]
    lines = build_block(turns, group_turns(turns)).lines
    assert [(line.kind, line.text) for line in lines] == [
        ("user", f"user: request {seq}") for seq in range(1, 9)
    ]
    # Seventeen groups: three to a line, the middle one named by neither end.
    turns = [_turn("user", seq, f"request {seq}") for seq in range(1, 18)]
    lines = build_block(turns, group_turns(turns)).lines
    assert [(line.lo, line.hi) for line in lines] == [
        (1, 3),
        (4, 6),
        (7, 9),
        (10, 12),
        (13, 15),
        (16, 17),
    ]
    assert lines[0].text == "user: request 1 … user: request 3"


def test_a_request_is_indexed_by_its_label_when_it_has_one() -> None:
    turns = [
        _turn("user", 1, "a long pasted request " * 20, label="summarise the pasted report"),
        _turn("user", 2, ""),
    ]
    block = build_block(turns, group_turns(turns))
    assert [line.text for line in block.lines] == [
        "user: summarise the pasted report",
        "user: (empty message)",
    ]


def test_a_fold_stub_previews_the_start_of_the_output() -> None:
    # The preview is cut from the output's first 400 characters (never the whole output,
    # which may be megabytes), whitespace collapsed, at most 80 characters shown.
    blank_start = _turn("tool", 7, " " * 399 + "late words", tool_call_id="c1")
    assert fold_stub(blank_start) == (
        "[tool output folded: 409 chars at seq 7; ms.expand(7) returns it in full] l"
    )
    exactly = _turn("tool", 9, "y" * 80, tool_call_id="c3")
    assert fold_stub(exactly).endswith("in full] " + "y" * 80)  # all of it: no ellipsis
    wordy = _turn("tool", 8, "word " * 100, tool_call_id="c2")
    assert fold_stub(wordy).endswith("in full] " + "word " * 16 + "…")  # 80 characters


def test_an_anchor_keeps_the_first_100_characters_of_a_request() -> None:
    turns = [_turn("user", 1, "x" * 150)]
    [line] = build_block(turns, group_turns(turns)).lines
    assert line.anchors == [{"seq": 1, "text": "x" * 100}]


def test_a_tail_longer_than_the_view_protects_all_of_it() -> None:
    turns = [_turn("user", 1, "first"), _turn("assistant", 2, "reply")]
    groups = group_turns(turns)
    assert protected_suffix(turns, groups, tail_groups=5, keep_results=0) == 0
    assert protected_suffix(turns, groups, tail_groups=1, keep_results=0) == 1


def test_an_exchange_is_named_by_its_newest_headline() -> None:
    call = {"type": "call", "id": "c1", "name": "run", "args": {}}
    turns = [
        _turn("assistant", 1, "", blocks=[call], headline="step 1 | planned | run | running"),
        _turn("tool", 2, "done", tool_call_id="c1", headline="step 1 | ran | check | ok"),
    ]
    [line] = build_block(turns, group_turns(turns)).lines
    assert line.text == "⟦ step 1 | ran | check | ok ⟧"


def test_the_active_request_is_the_latest_real_one() -> None:
    assert active_start([]) == 0
    nudge = _turn("user", 3, "keep going", synthetic=True)
    turns = [_turn("user", 1, "first"), _turn("assistant", 2, "ok"), nudge]
    assert active_start(turns) == 0  # a synthetic nudge is not a request
    assert active_start([_turn("assistant", 1, "hello")]) == 1  # none: past the end


def test_the_oldest_groups_are_protected_when_they_hold_what_must_stay() -> None:
    # The suffix reaches back to the first group that holds an unpersisted turn or one of the
    # newest keep_results tool results, even when that is the first or second group.
    call = {"type": "call", "id": "c1", "name": "search", "args": {}}
    exchange = [
        _turn("assistant", 1, "", blocks=[call]),
        _turn("tool", 2, "found", tool_call_id="c1", tool_name="search"),
    ]
    turns = [*exchange, _turn("user", 3, "next"), _turn("user", 4, "last")]
    groups = group_turns(turns)
    assert protected_suffix(turns, groups, tail_groups=0, keep_results=1) == 0
    assert protected_suffix(turns, groups, tail_groups=0, keep_results=0) == 3
    unsaved = [_turn("user", 1, "a"), Turn(role="user", text="b", source="test"), *turns[2:]]
    groups = group_turns(unsaved)
    assert protected_suffix(unsaved, groups, tail_groups=0, keep_results=0) == 1
