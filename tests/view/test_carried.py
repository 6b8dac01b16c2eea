"""The carried index of imported conversations (paper §3.3), on real Event Log files."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollctx.log import EventLog, NewEvent
from scrollctx.view import (
    EvictionIndex,
    carried_index,
    carried_session,
    carried_task_ids,
    estimate_tokens,
    write_carried_indexes,
)
from scrollctx.view._carried import conversation_sessions


def _import(log: EventLog, task: str, sessions: range, turns: int = 12) -> None:
    """Sessions as an importer writes them: run_id 'ingest', step_index, metadata.date."""
    events = []
    for number in sessions:
        date = f"2024-{1 + number // 28 % 12:02d}-{1 + number % 28:02d}"
        for position in range(turns):
            events.append(
                NewEvent(
                    session_id=f"{task}:s{number}",
                    kind="conversation",
                    role="user" if position % 2 == 0 else "assistant",
                    content=f"[Session {number} | {date}] topic {number}.{position} words here",
                    run_id="ingest",
                    task_id=task,
                    step_index=number,
                    msg_index=position,
                    metadata={"date": date},
                    dedup_key=f"{number}:{position}",
                )
            )
    log.append_many(events)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventLog]:
    with EventLog.open(tmp_path / "history.db") as log:
        yield log


@pytest.mark.parametrize("sessions", [50, 200])
def test_every_session_stays_addressable_within_the_stated_cost(
    store: EventLog, sessions: int
) -> None:
    """Each session's number is shown next to the seq where it starts, however far it rolled
    up; the index keeps O(k log_k n) blocks; its cost is at most 25 estimated tokens per
    session plus 400 (docs/view.md states the measured cost: benchmarks/bench_carried_index.py).
    """
    _import(store, "t", range(1, sessions + 1))
    write_carried_indexes(store, ["t"])
    data = carried_index(store, "t")
    assert data is not None
    index = EvictionIndex.from_data(data)
    text = index.render()
    starts = {s[0].session: s[0].seq for s in conversation_sessions(store, "t")}
    shown = {int(n): int(seq) for n, seq in re.findall(r"\bS(\d+)@(\d+)", text)}
    for seq, n in re.findall(r"· seq (\d+)(?:-\d+)?  \[Session (\d+) \|", text):
        shown[int(n)] = int(seq)
    assert shown == starts
    assert index.block_count() <= (4 - 1) * (math.ceil(math.log(sessions, 3)) + 1)
    assert estimate_tokens(text) <= 400 + 25 * sessions
    # the spans cover every imported event once, in order
    spans = index.spans()
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert spans[0][0] == 1 and spans[-1][1] == sessions * 12
    assert sum(hi - lo + 1 for lo, hi in spans) == sessions * 12


def test_rolled_up_lines_name_their_sessions_and_no_turn_count(store: EventLog) -> None:
    _import(store, "t", range(1, 51))
    write_carried_indexes(store, ["t"])
    text = EvictionIndex.from_data(carried_index(store, "t") or {}).render()
    assert "turns)" not in text  # the former, misleading "… (5 turns)"
    rolled = re.findall(r"Sessions (\d+)-(\d+) \((\S+) … (\S+)\): (.+)", text)
    assert rolled
    first, last, first_date, last_date, words = rolled[0]
    assert words.startswith(f"[Session {first} |") is False
    assert f"topic {first}.0" in words and f"topic {last}." in words.split(" … ")[-1]
    assert first_date.startswith("2024-") and last_date >= first_date


def test_a_new_session_appends_at_the_end_unless_a_tier_rolls_up(store: EventLog) -> None:
    """The stable prefix (provider caches): a session that causes no roll-up only appends."""
    _import(store, "t", range(1, 6))
    write_carried_indexes(store, ["t"])
    before = EvictionIndex.from_data(carried_index(store, "t") or {})
    _import(store, "t", range(6, 7))
    write_carried_indexes(store, ["t"])
    after = EvictionIndex.from_data(carried_index(store, "t") or {})
    assert after.counters["rollups"] == before.counters["rollups"]
    assert after.render().startswith(before.render())


def test_indexes_are_written_only_when_a_conversation_changed(store: EventLog) -> None:
    _import(store, "a", range(1, 4))
    _import(store, "b", range(1, 3), turns=3)
    first = write_carried_indexes(store, ["a", "b"])
    assert set(first) == {"a", "b"}
    assert write_carried_indexes(store, ["a", "b"]) == {}  # nothing changed: nothing written
    _import(store, "b", range(3, 4), turns=3)
    assert set(write_carried_indexes(store, ["a", "b"])) == {"b"}
    assert carried_task_ids(store) == ["a", "b"]
    rows = store.execute(
        "SELECT session_id, task_id, searchable FROM conversation_history WHERE kind = ?",
        ("eviction_index",),
    )
    assert [r["session_id"] for r in rows] == [carried_session(t) for t in ("a", "b", "b")]
    assert {r["task_id"] for r in rows} == {None}  # the conversation's rows stay its own
    assert carried_index(store, "missing") is None
    assert write_carried_indexes(store, ["missing"]) == {}
