"""Ingest throughput of ``ingest_path`` against bare SQLite FTS5 inserts of the same rows.

Run: ``.venv/bin/python benchmarks/bench_ingest.py [--sizes 500K] [--data DIR] [--work DIR]``

1. ``ingest_path`` imports every BEAM chat of the chosen tiers into one fresh store (one file
   after another, batches of 2,000 events, one transaction each): the wall time is the time to
   ingest the whole tier.
2. Baseline: the same rows (their ``prose``, ``code`` and ``headline`` text, read back from that
   store) are inserted into a bare FTS5 table with the same three columns and tokenizer, in the
   same WAL mode with ``synchronous=FULL``, in transactions of the same batch size.
3. For scale, the time ``json.load`` alone needs to decode the same files.

Prints rows/s and MB/s of source text (UTF-8 bytes of the messages' ``content``) for both, and
the ratio. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

BATCH = 2000
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def chat_files(data: Path, sizes: list[str]) -> list[Path]:
    """Return the tiers' ``chat.json`` files, tiers in the given order, chats numerically."""
    files = []
    for size in sizes:
        found = (data / "beam" / "chats" / size).glob("*/chat.json")
        files += sorted(found, key=lambda p: int(p.parent.name))
    return files


def source_bytes(files: list[Path]) -> tuple[int, float]:
    """Return the UTF-8 size of every message ``content`` and the seconds ``json.load`` took."""
    total = 0
    started = time.perf_counter()
    chats = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    seconds = time.perf_counter() - started
    for chat in chats:
        total += sum(len(m["content"].encode()) for m in _messages(chat))
    return total, seconds


def _messages(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if "role" in node and "content" in node:
            return [node]
        return [m for v in node.values() for m in _messages(v)]
    if isinstance(node, list):
        return [m for v in node for m in _messages(v)]
    return []


def run_ingest(files: list[Path], store: Path) -> tuple[int, float]:
    """Ingest every file into one fresh store; return (rows, seconds)."""
    started = time.perf_counter()
    with EventLog.open(store / "history.db") as log:
        for file in files:
            ingest_path(log, file, format="beam", batch_size=BATCH)
        seconds = time.perf_counter() - started
        rows = log.count()
    return rows, seconds


def read_rows(store: Path) -> list[tuple[str, str, str]]:
    """Read the text the FTS index holds for every searchable row back from the built store."""
    conn = sqlite3.connect(store / "history.db")
    try:
        return list(
            conn.execute("SELECT prose, code, headline FROM conversation_history_text ORDER BY seq")
        )
    finally:
        conn.close()


def run_bare(rows: list[tuple[str, str, str]], path: Path) -> float:
    """Insert ``rows`` into a bare FTS5 table in batches; return the seconds taken."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(prose, code, headline, tokenize='porter unicode61')"
    )
    started = time.perf_counter()
    for start in range(0, len(rows), BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO t(prose, code, headline) VALUES (?, ?, ?)", rows[start : start + BATCH]
        )
        conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500K", help="comma-separated BEAM tiers")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--work", type=Path, help="where the stores go (default: a temp folder)")
    args = parser.parse_args(argv)
    files = chat_files(args.data, [s.strip() for s in args.sizes.split(",")])
    if not files:
        print(f"no BEAM chat files for {args.sizes} under {args.data}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="scroll-bench-ingest-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        report(files, work, args.sizes)
    return 0


def report(files: list[Path], work: Path, sizes: str) -> None:
    """Run both measurements and print the numbers."""
    size, decode_s = source_bytes(files)  # also warms the page cache for both runs
    mb = size / 1e6
    rows, scroll_s = run_ingest(files, work / "scroll")
    bare_s = run_bare(read_rows(work / "scroll"), work / "bare.db")
    print(f"BEAM {sizes}: {len(files)} chats, {rows} rows, {mb:.1f} MB of message text")
    print(f"json.load alone:        {decode_s:7.2f} s")
    for name, seconds in (("ingest_path", scroll_s), ("bare FTS5 inserts", bare_s)):
        print(
            f"{name + ':':<23} {seconds:7.2f} s  {rows / seconds:9.0f} rows/s  "
            f"{mb / seconds:6.2f} MB/s"
        )
    print(f"ratio ingest_path / bare FTS5 time: {scroll_s / bare_s:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
