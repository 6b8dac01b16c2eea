"""The pure steps of Algorithm 1 over a list of live turns: groups, Protected, folds, SelectSpan.

Nothing here mutates a turn or touches the log; :mod:`scrollctx.view._working` plans with these
functions, persists the plan, then applies it.

Units. A **group** is one user message, or one assistant message together with the tool results
answering its calls: the smallest thing that can leave the view without splitting a tool call
from its result. A group is **complete** when every call it makes has its result.

Protected (never folded, never evicted in the first pass): the **active turn** (the latest real
user request, never a synthetic nudge, and everything after it) and the **protected suffix**:
the recent tail (the last ``tail_groups`` groups), the groups holding the **newest**
``keep_results`` tool results, anything not yet persisted or still awaiting results, and all
groups after the earliest of these. What may leave is therefore always a prefix of the live
turns, which keeps evicted spans ascending. Only if the view is still over budget once
everything before the active turn is gone does a second pass fold and evict completed groups
*inside* the active turn, between the request (which stays live, "pinned") and the suffix.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrollctx.view._index import (
    ANCHOR_CHARS,
    MAX_DETAIL_LINES,
    IndexBlock,
    IndexLine,
    clip_line,
    merge_anchors,
)
from scrollctx.view._turns import Turn

__all__ = [
    "Group",
    "build_block",
    "fold_stub",
    "group_turns",
    "protected_suffix",
]

_STUB_PREVIEW = 80


@dataclass(frozen=True, slots=True)
class Group:
    """Turns ``start <= i < end`` of the live list, forming one evictable unit."""

    start: int
    end: int
    is_complete: bool


def group_turns(turns: list[Turn]) -> list[Group]:
    """Split the live turns into groups (an assistant message takes its tool results along)."""
    # Runs on every eviction plan over every live turn, so it reads the call ids straight from
    # the blocks (what ``Turn.call_ids`` returns) instead of building a list per turn.
    groups: list[Group] = []
    index = 0
    count = len(turns)
    while index < count:
        turn = turns[index]
        end = index + 1
        waiting = (
            {str(b["id"]) for b in turn.blocks if b["type"] == "call"}
            if turn.role == "assistant"
            else None
        )
        while waiting and end < count and turns[end].role == "tool":
            waiting.discard(turns[end].tool_call_id or "")
            end += 1
        groups.append(Group(index, end, not waiting))
        index = end
    return groups


def active_start(turns: list[Turn]) -> int:
    """Return the index of the latest real user request (``len(turns)`` if there is none)."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].is_real_user:
            return index
    return len(turns)


def protected_suffix(
    turns: list[Turn], groups: list[Group], *, tail_groups: int, keep_results: int
) -> int:
    """Return the position (in ``groups``) where the protected suffix starts.

    The suffix holds the last ``tail_groups`` groups, the groups of the newest
    ``keep_results`` tool results, and every group from the first incomplete or unpersisted
    one on; everything after its start is protected too, so what may leave stays a prefix.
    """
    start = max(0, len(groups) - tail_groups)
    results = 0
    for position in range(len(groups) - 1, -1, -1):
        group = groups[position]
        found = 0
        unpersisted = False
        for at in range(group.start, group.end):
            turn = turns[at]
            unpersisted = unpersisted or turn.seq is None
            found += turn.role == "tool"
        if (unpersisted or not group.is_complete or (found and results < keep_results)) and (
            position < start
        ):
            start = position
        results += found
    return start


def fold_stub(turn: Turn) -> str:
    """Return the pointer stub that replaces a folded tool result."""
    first = " ".join(turn.text[:400].split())
    preview = first[:_STUB_PREVIEW] + ("…" if len(first) > _STUB_PREVIEW else "")
    return (
        f"[tool output folded: {len(turn.text):,} chars at seq {turn.seq}; "
        f"ms.expand({turn.seq}) returns it in full] {preview}"
    )


def build_block(turns: list[Turn], groups: list[Group]) -> IndexBlock:
    """Return the tier-0 block for evicted ``groups`` (at most ``MAX_DETAIL_LINES`` lines)."""
    lines = [_group_line(turns[g.start : g.end]) for g in groups]
    if len(lines) <= MAX_DETAIL_LINES:
        return IndexBlock(lines)
    size = -(-len(lines) // MAX_DETAIL_LINES)
    return IndexBlock([_merge(lines[i : i + size]) for i in range(0, len(lines), size)])


def _group_line(members: list[Turn]) -> IndexLine:
    lo, hi = _seq(members[0]), _seq(members[-1])
    head = members[0]
    if head.role == "user":
        label = clip_line(head.label or head.text or "(empty message)")
        if head.is_real_user:
            anchor = {"seq": lo, "text": label[:ANCHOR_CHARS]}
            return IndexLine(lo, hi, "user", f"user: {label}", [anchor], 1)
        return IndexLine(lo, hi, "turn", f"note: {label}")
    return IndexLine(lo, hi, "turn", clip_line(_describe_exchange(members)))


def _describe_exchange(members: list[Turn]) -> str:
    headlines = [t.headline for t in members if t.headline]
    if headlines:
        return f"⟦ {headlines[-1]} ⟧"
    head = members[0]
    calls = [f"{b['name']}({str(b['args'])[:60]})" for b in head.blocks if b["type"] == "call"]
    text = head.label or ""
    if calls:
        results = sum(1 for t in members if t.role == "tool")
        text = f"{text} [called {', '.join(calls)}; {results} result(s)]".strip()
    return text or f"({head.role} turn)"


def _merge(lines: list[IndexLine]) -> IndexLine:
    # Every request of a fresh eviction stays listed (#7836); roll-ups thin them out later.
    anchors, count = merge_anchors(lines, limit=None)
    text = lines[0].text if len(lines) == 1 else f"{lines[0].text} … {lines[-1].text}"
    return IndexLine(lines[0].lo, lines[-1].hi, "turn", clip_line(text), anchors, count)


def _seq(turn: Turn) -> int:
    if turn.seq is None:
        raise ValueError("an unpersisted turn cannot enter the index")
    return turn.seq
