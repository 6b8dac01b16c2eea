"""Fixture store writer for the memory-surface tests: real SQLite files through EventLog."""

from __future__ import annotations

import hashlib
from pathlib import Path

from scrollctx.log import EventLog, NewEvent

BIG = "The full travel log. " + "Paris Lyon Marseille itinerary details. " * 600 + "THE END"

# (session, task, agent, step, role, date, content) -- seqs are assigned 1.. in this order.
ROWS: list[tuple[str, str, str | None, int, str, str, str]] = [
    ("s1", "t1", None, 1, "user", "2024-03-01", "Pamela called the vendor about catering."),
    ("s1", "t1", None, 1, "assistant", "2024-03-01", "Great, Pamela can handle vendor calls."),
    ("s1", "t1", None, 2, "user", "2024-03-05", "I didn't say Pamela coordinated anything."),
    ("s1", "t1", None, 2, "assistant", "2024-03-05", "Noted: she wasn't the coordinator."),
    ("s1", "t1", None, 3, "user", "2024-03-10", "Our sprint on 2024-11-05 logged 17 tasks."),
    ("s1", "t1", None, 3, "user", "2024-03-10", "I write C++ templates and use std::vector."),
    ("s2", "t2", "a1", 1, "user", "2024-04-01", "Plan the route, I want to avoid tolls."),
    (
        "s2",
        "t2",
        "a1",
        1,
        "assistant",
        "2024-04-01",
        "Route planning: Google Maps can avoid tolls.",
    ),
    ("s2", "t2", "a2", 2, "user", "2024-04-20", "Roadtrippers helps me map out scenic stops."),
    ("s2", "t2", "a2", 2, "user", "2024-04-21", "The red car was parked near the blue house."),
    ("s2", "t2", "a2", 2, "user", "2024-04-22", "The blue car was parked near the red house."),
    ("s3", "t2", None, 1, "user", "2024-05-01", BIG),
    (
        "s3",
        "t2",
        None,
        1,
        "user",
        "2024-05-02",
        "Code sample:\n```python\nprint('vendor')\n```\nok",
    ),
]


def write_store(folder: Path, *, fts5: bool = True) -> Path:
    """Write ROWS (plus a tool call/result pair) into a fresh store; return the db path."""
    path = folder / "history.db"
    events = [
        NewEvent(
            session_id=session,
            task_id=task,
            agent_id=agent,
            kind="conversation",
            role=role,
            step_index=step,
            msg_index=i,
            content=content,
            metadata={"date": date},
            created_at=f"{date}T10:00:{i:02d}.000000Z",
        )
        for i, (session, task, agent, step, role, date, content) in enumerate(ROWS)
    ]
    events += [
        NewEvent(
            session_id="s3",
            kind="tool_call",
            tool_call_id="call_1",
            name="fetch",
            tool_input={"url": "x"},
            content="fetch(url='x')",
            created_at="2024-05-03T00:00:00.000000Z",
        ),
        NewEvent(
            session_id="s3",
            kind="tool_result",
            tool_call_id="call_1",
            name="fetch",
            content="R" * 20000,
            created_at="2024-05-03T00:00:01.000000Z",
        ),
    ]
    with EventLog.open(path, fts5=fts5) as log:
        log.append_many(events)
    return path


def digest(path: Path) -> dict[str, str]:
    """sha256 of the db file and its WAL, to prove a store was not touched."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (path, path.with_name(path.name + "-wal"))
        if p.exists()
    }
