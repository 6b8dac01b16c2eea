"""Token cost and legibility of the carried index for long histories (50, 200, 1,000 sessions).

Run: ``.venv/bin/python benchmarks/bench_carried_index.py [--sessions 50,200,1000]
[--turns 12] [--k 4] [--data DIR]``

Histories are built from real BEAM 500K messages (their text gives realistic extractive
labels), cut into sessions of ``--turns`` turns, one day apart, and imported into a fresh Event
Log as an importer would (``run_id='ingest'``, ``step_index`` = session number, ``metadata.date``).
For each size the script prints, for three renderings of the same history:

- ``carried``: :func:`scrollctx.view.write_carried_indexes` (one block per session, tiers of
  width k, session marks kept through every roll-up);
- ``flat``: the baseline a careful user would write by hand, one line per session
  (``[Session N | date] seq lo-hi  first label``), which grows linearly;
- ``previous``: the format before session marks (the session tag inside the text, chunk lines
  ending in ``(N turns)``, roll-ups keeping only the first and last text).

Columns: estimated tokens of the rendered index (:func:`scrollctx.view.estimate_tokens`),
blocks, and how many sessions are addressable at a glance (their number is shown with the
seq where they start), plus the ratio carried / flat.

``--ingest TIER`` also times what the carried index adds to ingestion: ``ingest_path`` of the
whole BEAM tier into a fresh store (which ends by writing the carried indexes), and, on that
store, rebuilding every conversation's carried index from the log (the same work, without the
final appends); ``--repeats`` alternating runs, min / median / max. Numbers only; nothing is
asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import EvictionIndex, IndexBlock, IndexLine, estimate_tokens
from scrollctx.view._carried import (
    LINES_PER_SESSION,
    build_carried_index,
    conversation_sessions,
    write_carried_indexes,
)
from scrollctx.view._index import clip_line

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TASK = "bench/history"


def beam_messages(data: Path) -> list[dict[str, Any]]:
    """Every message of the BEAM 500K chats, in chat order."""
    messages: list[dict[str, Any]] = []
    for chat in sorted((data / "beam" / "chats" / "500K").glob("*/chat.json")):
        for batch in json.loads(chat.read_text(encoding="utf-8")):
            for group in batch["turns"]:
                messages += [m for m in group if m.get("content")]
    return messages


def build_history(log: EventLog, messages: list[dict[str, Any]], sessions: int, turns: int) -> None:
    events = []
    for number in range(1, sessions + 1):
        date = f"{2020 + number // 365:04d}-{1 + (number // 28) % 12:02d}-{1 + number % 28:02d}"
        for position in range(turns):
            message = messages[((number - 1) * turns + position) % len(messages)]
            events.append(
                NewEvent(
                    session_id=f"bench:s{number}",
                    kind="conversation",
                    role=str(message["role"]),
                    content=f"[Session {number} | {date}] {message['role']}: {message['content']}",
                    run_id="ingest",
                    task_id=TASK,
                    step_index=number,
                    msg_index=position,
                    metadata={"date": date},
                    dedup_key=f"s{number}:{position}",
                )
            )
    log.append_many(events)


def flat_index(sessions: list[list[Any]]) -> str:
    lines = [
        f"[Session {s[0].session} | {s[0].date}] seq {s[0].seq}-{s[-1].seq}  {clip_line(s[0].text)}"
        for s in sessions
    ]
    return "\n".join(lines)


def previous_index(sessions: list[list[Any]], k: int) -> EvictionIndex:
    """The format before session marks, rebuilt for comparison."""
    index = EvictionIndex(k, "previous")
    for turns in sessions:
        size = -(-len(turns) // LINES_PER_SESSION)
        lines = []
        for start in range(0, len(turns), size):
            chunk = turns[start : start + size]
            text = chunk[0].text
            if start == 0:
                text = f"[Session {chunk[0].session} | {chunk[0].date}] {text}"
            if len(chunk) > 1:
                text = f"{text} … ({len(chunk)} turns)"
            lines.append(IndexLine(chunk[0].seq, chunk[-1].seq, "turn", clip_line(text)))
        index.add(IndexBlock(lines), len(turns))
    return index


def measure(data: Path, sizes: list[int], turns: int, k: int) -> None:
    messages = beam_messages(data)
    print(f"sessions of {turns} turns from BEAM 500K messages; k = {k}; tokens are estimates")
    header = (
        f"{'sessions':>8} | {'format':<8} | {'tokens':>7} | {'blocks':>6} | "
        f"{'addressable':>11} | carried / flat"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            with EventLog.open(Path(folder) / "history.db") as log:
                build_history(log, messages, size, turns)
                write_carried_indexes(log, [TASK], k=k)
                sessions = conversation_sessions(log, TASK)
                rows = log.execute(
                    "SELECT seq FROM conversation_history WHERE kind = 'eviction_index'"
                )
                carried = EvictionIndex.from_data(dict(log.get(int(rows[0]["seq"])).metadata))
        flat = flat_index(sessions)
        previous = previous_index(sessions, k)
        costs = {}
        for name, text, blocks in (
            ("carried", carried.render(), carried.block_count()),
            ("flat", flat, len(sessions)),
            ("previous", previous.render(), previous.block_count()),
        ):
            costs[name] = estimate_tokens(text)
            seen = count_addressable(text, sessions)
            ratio = f"{costs['carried'] / costs['flat']:.2f}" if name == "flat" else ""
            print(
                f"{size:>8} | {name:<8} | {costs[name]:>7,} | {blocks:>6} | "
                f"{seen:>5} / {len(sessions):<4} | {ratio}"
            )


def count_addressable(text: str, sessions: list[list[Any]]) -> int:
    """How many sessions are shown by number next to the seq where they start."""
    start = {s[0].session: s[0].seq for s in sessions}
    found = {
        int(n) for n, seq in re.findall(r"\bS(\d+)@(\d+)", text) if start.get(int(n)) == int(seq)
    }
    for seq, n in re.findall(r"· seq (\d+)(?:-\d+)?  \[Session (\d+)\b", text):
        if start.get(int(n)) == int(seq):
            found.add(int(n))
    for n, seq in re.findall(r"\[Session (\d+) \| [^\]]*\] seq (\d+)", text):
        if start.get(int(n)) == int(seq):
            found.add(int(n))
    return len(found)


def time_ingestion(data: Path, tier: str, repeats: int) -> None:
    folder = data / "beam" / "chats" / tier
    ingest, rebuild = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as work:
            with EventLog.open(Path(work) / "history.db") as log:
                started = time.perf_counter()
                ingest_path(log, folder)
                ingest.append(time.perf_counter() - started)
                tasks = [
                    str(row["task_id"])
                    for row in log.execute(
                        "SELECT DISTINCT task_id FROM conversation_history "
                        "WHERE run_id = 'ingest' AND task_id IS NOT NULL"
                    )
                ]
                started = time.perf_counter()
                for task in tasks:
                    build_carried_index(conversation_sessions(log, task))
                rebuild.append(time.perf_counter() - started)
    shares = [r / i for r, i in zip(rebuild, ingest, strict=True)]
    print(f"\nBEAM {tier}: {len(tasks)} conversations, {repeats} runs (min / median / max)")
    for name, values in (("ingest_path (ends with the carried indexes)", ingest),
                         ("carried indexes rebuilt from the log", rebuild)):  # fmt: skip
        print(f"{name:<45} {_spread(values, 's')}")
    print(f"{'carried index / ingest_path':<45} {_spread([100 * s for s in shares], '%')}")


def _spread(values: list[float], unit: str) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:.2f} / {mid:.2f} / {high:.2f} {unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="50,200,1000")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--ingest", metavar="TIER", help="also time ingestion of a BEAM tier")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(part) for part in args.sessions.split(",")]
    measure(args.data, sizes, args.turns, args.k)
    if args.ingest:
        time_ingestion(args.data, args.ingest, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
