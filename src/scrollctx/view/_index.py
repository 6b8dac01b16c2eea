"""The tiered eviction index: every evicted span, addressable by its exact ``seq`` range.

Structure. ``tiers[0]`` holds the most recent evictions in full detail; higher tiers hold older
history in coarser lines. A tier holds blocks; a block holds lines; every line and every block
carries its exact ``seq`` span ``[lo, hi]``. Adding an eviction appends one block to tier 0.
When a tier reaches ``k`` blocks it **rolls up**: its newest block keeps its detail and stays,
and the ``k - 1`` older blocks collapse to one line each, forming one new block appended to
the next tier. After ``n`` evictions the index holds at most ``(k - 1) * (ceil(log_{k-1} n)
+ 1)`` blocks, i.e. O(k log_k n) (``k >= 3``).

Invariants (checked by the tests):

- spans of all lines, read from the highest tier down to tier 0, are disjoint and ascending;
- a block's span is its lines' hull; lines inside a block are contiguous in eviction order;
- the union of spans covers exactly the evicted events of the session's view;
- rendering lists the highest tier first and tier 0 last, so a new eviction that causes no
  roll-up appends at the very end of the text: the text before it stays byte-identical.

Real user requests inside a span are **anchors**: a tier-0 line of its own
(``user: "…"``) or, when a large eviction merges its lines, every one of them listed on the
merged line; once rolled up, carried on the collapsed line: the oldest and the newest request
of the span (their label, up to ``ANCHOR_CHARS``) and the count of all of them.

Imported sessions (the carried index, :mod:`scrollctx.view._carried`) are **session marks**:
the line where a session starts carries ``{"n", "seq", "date"}``, and a collapsed line keeps
the marks of every line it replaces, all of them. So every session stays addressable at a
glance however far it rolled up: a line covering several sessions renders as ``Sessions 1-16
(first date … last date): first text … last text`` followed by ``sessions start at: S1@1
S2@131 …``, about five tokens per session. A rolled-up line's text is always the first and
the last content text of what it replaces (never a count, which the span already gives).

Data shape (``to_data()``; ``ms.index()``; the ``eviction_index`` event's metadata, where a
block an earlier event already holds is stored as a reference, see :mod:`._stored`)::

    {
      "version": 1, "k": 4, "session_id": "s1",
      "counters": {"evictions": 7, "rollups": 2, "evicted_events": 40, "folds": 12, ...},
      "tiers": [                                  # tiers[0] is Tier 0: newest, most detailed
        {"tier": 0, "blocks": [
          {"lo": 101, "hi": 118, "lines": [
            {"lo": 101, "hi": 101, "kind": "user", "text": "user: fix the parser",
             "anchors": [{"seq": 101, "text": "fix the parser"}], "anchor_count": 1},
            {"lo": 102, "hi": 118, "kind": "turn", "text": "⟦ parser | … | done ⟧",
             "anchors": [], "anchor_count": 0}]}]},   # + "sessions": [...] on session marks
        {"tier": 1, "blocks": [...]}],
      "view_state": {"live_from": 119, "pinned": [], "folded": [120, 124]}   # restore state
    }

``kind`` is ``user`` (a real user request), ``turn`` (an exchange; text is its headline, else
its extractive label) or ``rollup`` (a collapsed block: ``first … last``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "INDEX_HEADER",
    "ANCHOR_CHARS",
    "MAX_ANCHORS",
    "MAX_DETAIL_LINES",
    "EvictionIndex",
    "IndexBlock",
    "IndexLine",
    "clip_line",
    "merge_anchors",
]

MAX_ANCHORS = 2
ANCHOR_CHARS = 100
MAX_DETAIL_LINES = 8
_LINE_CHARS = 200
_HALF_CHARS = 90
_ELLIPSIS = " … "

INDEX_HEADER = """\
[eviction index] Older turns of this session left your live context. They are not lost: \
every one is stored verbatim in the Event Log, and each line below names its exact seq span. \
Oldest history is at the top in coarse lines, the most recent evictions at the bottom in \
detail. To recover a span, run ms.expand(lo, hi) in recall_history_python (full rows, tool \
outputs included); to find something by its words, ms.search("words"). Lines starting with \
"user:" are requests the user made. This is a map of the past, not the conversation: answer \
the latest user message in the live turns that follow."""


@dataclass(frozen=True, slots=True)
class IndexLine:
    """One line of the index: a seq span and what happened in it (never changed once made)."""

    lo: int
    hi: int
    kind: str
    text: str
    anchors: list[dict[str, Any]] = field(default_factory=list)
    anchor_count: int = 0
    sessions: list[dict[str, Any]] = field(default_factory=list)
    """Session marks: the imported sessions that start inside this line's span, in order."""

    def to_data(self) -> dict[str, Any]:
        """Return the line as JSON-able data (``sessions`` only when it has marks)."""
        data = {
            "lo": self.lo,
            "hi": self.hi,
            "kind": self.kind,
            "text": self.text,
            "anchors": _copied(self.anchors),
            "anchor_count": self.anchor_count,
        }
        if self.sessions:
            data["sessions"] = _copied(self.sessions)
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> IndexLine:
        """Rebuild a line from :meth:`to_data` output."""
        return cls(
            data["lo"],
            data["hi"],
            data["kind"],
            data["text"],
            data["anchors"],
            data["anchor_count"],
            list(data.get("sessions", [])),
        )

    def render(self) -> str:
        """Return the line as the model reads it."""
        span = f"seq {self.lo}" if self.lo == self.hi else f"seq {self.lo}-{self.hi}"
        text = f"  · {span}  {_session_title(self.sessions)}{self.text}"
        if len(self.sessions) > 1:
            starts = " ".join(f"S{mark['n']}@{mark['seq']}" for mark in self.sessions)
            text += f"\n      sessions start at: {starts}"
        if self.kind == "user" or not self.anchor_count:
            return text
        shown = "; ".join(f'seq {a["seq"]} "{a["text"]}"' for a in self.anchors)
        more = self.anchor_count - len(self.anchors)
        suffix = f" (+{more} more)" if more > 0 else ""
        return f"{text}\n      user asked: {shown}{suffix}"


def _session_title(marks: list[dict[str, Any]]) -> str:
    """``[Session 3 | 2024-03-05] `` for one mark; ``Sessions 1-16 (… … …): `` for several."""
    if not marks:
        return ""
    first, last = marks[0], marks[-1]
    if len(marks) == 1:
        date = f" | {first['date']}" if first.get("date") else ""
        return f"[Session {first['n']}{date}] "
    dates = f" ({first['date']} … {last['date']})" if first.get("date") and last.get("date") else ""
    return f"Sessions {first['n']}-{last['n']}{dates}: "


@dataclass(frozen=True, slots=True)
class IndexBlock:
    """A run of lines covering one contiguous evicted span (never changed once made)."""

    lines: list[IndexLine]

    @property
    def lo(self) -> int:
        """First seq of the block."""
        return self.lines[0].lo

    @property
    def hi(self) -> int:
        """Last seq of the block."""
        return self.lines[-1].hi

    def to_data(self) -> dict[str, Any]:
        """Return the block as JSON-able data."""
        return {"lo": self.lo, "hi": self.hi, "lines": [line.to_data() for line in self.lines]}

    def render(self) -> str:
        """Return the block as the model reads it."""
        return "\n".join(text for text, _ in self.render_parts())

    def render_parts(self) -> list[tuple[str, IndexLine | None]]:
        """Return the block's title and lines as text pieces, each line with its span."""
        return [(f"[seq {self.lo}-{self.hi}]", None)] + [(ln.render(), ln) for ln in self.lines]

    def collapse(self) -> IndexLine:
        """Return this block as one line: first and last text, all anchors merged."""
        # Requests travel as anchors, so the text prefers what was done: the first and the
        # last headline (or label) of the block.
        texts = [line.text for line in self.lines if line.kind != "user"]
        texts = texts or [line.text for line in self.lines]
        head = _clip(texts[0].split(_ELLIPSIS)[0], _HALF_CHARS)
        tail = _clip(texts[-1].split(_ELLIPSIS)[-1], _HALF_CHARS)
        text = head if head == tail else head.rstrip("…").rstrip() + _ELLIPSIS + tail
        anchors, count = merge_anchors(self.lines)
        marks = _copied([mark for line in self.lines for mark in line.sessions])
        return IndexLine(self.lo, self.hi, "rollup", text, anchors, count, marks)


class EvictionIndex:
    """The tiered index of one session's evictions (``k`` blocks per tier before a roll-up)."""

    def __init__(self, k: int, session_id: str) -> None:
        self.k = k
        self.session_id = session_id
        self.tiers: list[list[IndexBlock]] = []
        self.counters: dict[str, int] = {"evictions": 0, "rollups": 0, "evicted_events": 0}

    def add(self, block: IndexBlock, evicted_events: int) -> int:
        """Append an eviction's block to tier 0, roll up full tiers; return the roll-ups done."""
        if not self.tiers:
            self.tiers.append([])
        self.tiers[0].append(block)
        self.counters["evictions"] += 1
        self.counters["evicted_events"] += evicted_events
        rolled = self._roll_up()
        self.counters["rollups"] += rolled
        return rolled

    def _roll_up(self) -> int:
        rolled = 0
        tier = 0
        while tier < len(self.tiers) and len(self.tiers[tier]) >= self.k:
            blocks = self.tiers[tier]
            carried = IndexBlock([block.collapse() for block in blocks[:-1]])
            self.tiers[tier] = blocks[-1:]
            if tier + 1 == len(self.tiers):
                self.tiers.append([])
            self.tiers[tier + 1].append(carried)
            rolled += 1
            tier += 1
        return rolled

    @property
    def is_empty(self) -> bool:
        """Whether nothing was evicted yet."""
        return not any(self.tiers)

    def blocks(self) -> list[IndexBlock]:
        """Return every block, oldest first (highest tier first)."""
        return [block for tier in reversed(self.tiers) for block in tier]

    def block_count(self) -> int:
        """Return the number of blocks over all tiers."""
        return sum(len(tier) for tier in self.tiers)

    def spans(self) -> list[tuple[int, int]]:
        """Return every line's span, oldest first."""
        return [(line.lo, line.hi) for block in self.blocks() for line in block.lines]

    def render(self) -> str:
        """Return the index message text (empty when nothing was evicted)."""
        return "\n".join(text for text, _ in self.render_parts())

    def render_parts(self) -> list[tuple[str, IndexLine | None]]:
        """Return the index message as its text pieces, in order, each with the line whose
        span it renders (``None`` for the header, tier and block titles): joined with
        newlines they are exactly :meth:`render` (an inspector links each line to its span)."""
        if self.is_empty:
            return []
        parts: list[tuple[str, IndexLine | None]] = [(INDEX_HEADER, None)]
        for level in range(len(self.tiers) - 1, -1, -1):
            if not self.tiers[level]:
                continue
            parts.append((f"\n== tier {level} ==", None))
            for block in self.tiers[level]:
                parts += block.render_parts()
        return parts

    def to_data(self, view_state: dict[str, Any] | None = None) -> dict[str, Any]:
        """Return the index as JSON-able data (see the module docstring for the shape)."""
        data: dict[str, Any] = {
            "version": 1,
            "k": self.k,
            "session_id": self.session_id,
            "counters": dict(self.counters),
            "tiers": [
                {"tier": level, "blocks": [block.to_data() for block in blocks]}
                for level, blocks in enumerate(self.tiers)
            ],
        }
        if view_state is not None:
            data["view_state"] = view_state
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> EvictionIndex:
        """Rebuild an index from :meth:`to_data` output."""
        index = cls(int(data["k"]), str(data["session_id"]))
        index.counters = {key: int(data["counters"].get(key, 0)) for key in index.counters}
        index.tiers = [
            [IndexBlock([IndexLine.from_data(line) for line in b["lines"]]) for b in tier["blocks"]]
            for tier in data["tiers"]
        ]
        return index

    def copy(self) -> EvictionIndex:
        """Return an independent copy (a plan is built on a copy and committed after persist).

        Blocks and lines are never changed once made (an eviction adds a block, a roll-up
        replaces blocks with new ones), so the copy shares them and copies only what
        :meth:`add` changes: the tier lists and the counters. Copying every block as well made
        each eviction plan cost time in the size of the whole index.
        """
        index = EvictionIndex(self.k, self.session_id)
        index.tiers = [list(tier) for tier in self.tiers]
        index.counters = dict(self.counters)
        return index


def merge_anchors(
    lines: list[IndexLine], limit: int | None = MAX_ANCHORS
) -> tuple[list[dict[str, Any]], int]:
    """Merge the anchors of lines: keep the first and the newest ones, count them all.

    ``limit=None`` keeps every anchor (a tier-0 block merging its own lines: each request
    evicted by this eviction stays listed until the block rolls up).
    """
    every = [anchor for line in lines for anchor in line.anchors]
    count = sum(line.anchor_count for line in lines)
    if limit is not None and len(every) > limit:
        every = every[:1] + every[-(limit - 1) :]
    return _copied(every), count


def _copied(marks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An independent copy of anchors or session marks (JSON data: dicts, lists, scalars).

    ``copy.deepcopy`` did the same at about ten times the cost: every index event copies every
    anchor of the index, which made it a tenth of a long simulated session's CPU.
    """
    return [_copied_value(mark) for mark in marks]


def _copied_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copied_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied_value(item) for item in value]
    return value


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clip_line(text: str) -> str:
    """Return ``text`` on one line, at most the index's line width."""
    return _clip(text, _LINE_CHARS)
