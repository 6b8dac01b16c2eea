"""Ingest throughput of ``ingest_path`` against bare SQLite FTS5 inserts of the same rows.

Run: ``.venv/bin/python benchmarks/bench_ingest.py [--sizes 500K] [--repeats 5] [--data DIR]
[--work DIR]``

Each repeat runs both sides, in an order that alternates from repeat to repeat:

1. ``ingest_path`` imports every BEAM chat of the chosen tiers into one fresh store (one file
   after another, batches of 2,000 events, one transaction each): wall and CPU time of the
   whole tier. Its COMMITs are counted (SQLite's statement trace on the log's connection).
2. Baseline: the same rows (their ``prose``, ``code`` and ``headline`` text, read back from the
   first store) are inserted into a fresh bare FTS5 table with the same three columns and
   tokenizer, in the same WAL mode with ``synchronous=FULL``, committing after the same rows
   as the store did (each file's rows in batches of 2,000): the same commits of rows. The
   store also commits each chat's carried index after its rows (one small event per
   conversation, no FTS row); the script checks that the store made exactly those commits.

After the import the store's index is merged (``EventLog.merge_search_index``, the last step
of ``scroll ingest``), timed on its own and printed beside the ratio with and without it.

Then, once: ``scroll ingest --format beam FILES`` as a fresh process into a fresh store, for
its peak memory (``ru_maxrss`` of the child), and ``json.load`` of the same files for scale.

Prints rows/s and MB/s of source text (UTF-8 bytes of the messages' ``content``) per side
(min / median / max over repeats) and the time ratio per repeat (min / median / max), with the
load average. Numbers only; nothing is asserted but the commit counts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _compare import load_average, ratio_spread, spread

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


def run_ingest(
    files: list[Path], store: Path
) -> tuple[list[int], int, tuple[float, float], tuple[float, float]]:
    """Ingest every file into one fresh store, then merge its index as ``scroll ingest`` does.

    Returns (rows added per file, COMMITs of the import, (wall s, CPU s) of the import, and
    (wall s, CPU s) of the merge).
    """
    statements: list[str] = []
    per_file: list[int] = []
    started, cpu = time.perf_counter(), time.process_time()
    with EventLog.open(store / "history.db") as log:
        log._conn.set_trace_callback(statements.append)  # private: only to count COMMITs
        for file in files:
            before = log.last_seq()
            ingest_path(log, file, format="beam", batch_size=BATCH)
            per_file.append(log.last_seq() - before)
        imported = time.perf_counter() - started, time.process_time() - cpu
        log._conn.set_trace_callback(None)
        log.merge_search_index()
        merged = (
            time.perf_counter() - started - imported[0],
            time.process_time() - cpu - imported[1],
        )
    return per_file, statements.count("COMMIT"), imported, merged


def read_rows(store: Path) -> list[tuple[str, str, str]]:
    """Read the text the FTS index holds for every searchable row back from the built store."""
    conn = sqlite3.connect(store / "history.db")
    try:
        return list(
            conn.execute("SELECT prose, code, headline FROM conversation_history_text ORDER BY seq")
        )
    finally:
        conn.close()


def commit_batches(per_file: list[int], searchable: int, total: int) -> list[int]:
    """The bare side's rows per commit: each file's rows in batches of ``BATCH``, as the store
    committed them, scaled to the searchable rows the bare table receives."""
    sizes = [min(BATCH, n - start) for n in per_file for start in range(0, n, BATCH)]
    scaled, given = [], 0
    for position, size in enumerate(sizes):
        share = searchable - given if position == len(sizes) - 1 else size * searchable // total
        scaled.append(share)
        given += share
    return scaled


def run_bare(
    rows: list[tuple[str, str, str]], batches: list[int], path: Path
) -> tuple[float, float]:
    """Insert ``rows`` into a bare FTS5 table, one commit per batch; return (wall s, CPU s)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(prose, code, headline, tokenize='porter unicode61')"
    )
    started, cpu = time.perf_counter(), time.process_time()
    start = 0
    for size in batches:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO t(prose, code, headline) VALUES (?, ?, ?)", rows[start : start + size]
        )
        conn.execute("COMMIT")
        start += size
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    return seconds, cpu


def ingest_peak_rss(files: list[Path], store: Path) -> int:
    """Peak resident memory (KiB) of ``scroll ingest --format beam FILES`` as a fresh process."""
    code = (
        "import resource, sys; from scrollctx.cli import run; code = run(sys.argv[1:]); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); "
        "sys.exit(code)"
    )
    argv = [sys.executable, "-c", code, "ingest", "--format", "beam", "--store", str(store)]
    done = subprocess.run([*argv, *map(str, files)], capture_output=True, text=True, check=True)
    return int(done.stderr.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500K", help="comma-separated BEAM tiers")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of both sides")
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
        return report(files, work, args.sizes, args.repeats)


def report(files: list[Path], work: Path, sizes: str, repeats: int) -> int:
    """Run the repeats and print the numbers; 1 if the commit counts differ."""
    size, decode_s = source_bytes(files)  # also warms the page cache for both sides
    mb = size / 1e6
    print(f"BEAM {sizes}: {len(files)} chats, {mb:.1f} MB of message text; {load_average()}")
    runs: dict[str, list[tuple[float, float]]] = {"ingest_path": [], "bare FTS5": [], "merge": []}
    rows: list[tuple[str, str, str]] = []
    batches: list[int] = []
    total = commits = 0
    for repeat in range(repeats):
        order = ["ingest_path", "bare FTS5"] if repeat % 2 == 0 else ["bare FTS5", "ingest_path"]
        for side in order:
            folder = work / f"{repeat}-{side.split()[0]}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            if side == "ingest_path":
                per_file, commits, measured, merged = run_ingest(files, folder)
                runs["merge"].append(merged)
                if not rows:
                    rows, total = read_rows(folder), sum(per_file)
                    batches = commit_batches(per_file, len(rows), total)
            else:
                measured = run_bare(rows, batches, folder / "bare.db")
            runs[side].append(measured)
            shutil.rmtree(folder, ignore_errors=True)
        print(f"repeat {repeat + 1}/{repeats} done; {load_average()}", flush=True)
    if commits != len(batches) + len(files):
        print(f"commit counts differ: ingest_path {commits}, bare {len(batches)} + {len(files)}")
        return 1
    peak_kib = ingest_peak_rss(files, work / "cli")
    print(
        f"{total} rows ({len(rows)} searchable); {len(batches)} commits of rows on each side, "
        f"and ingest_path's {len(files)} commits of the chats' carried indexes"
    )
    print(f"json.load alone: {decode_s:.2f} s")
    for side, measured in runs.items():
        walls, cpus = [w for w, _ in measured], [c for _, c in measured]
        print(f"{side + ':':<13} wall {spread(walls, 1, 's')}  CPU {spread(cpus, 1, 's')}")
        if side != "merge":
            mid = statistics.median(walls)
            print(f"{'':<13} median {total / mid:9.0f} rows/s  {mb / mid:6.2f} MB/s")
    for index, what in ((0, "wall"), (1, "CPU")):
        with_merge = [
            (a[index] + m[index]) / b[index]
            for a, m, b in zip(runs["ingest_path"], runs["merge"], runs["bare FTS5"], strict=True)
        ]
        print(f"ratio (ingest_path + merge) / bare FTS5 ({what}): {ratio_spread(with_merge)}")
        ratios = [
            a[index] / b[index] for a, b in zip(runs["ingest_path"], runs["bare FTS5"], strict=True)
        ]
        print(f"ratio ingest_path / bare FTS5 ({what} time): {ratio_spread(ratios)}")
    print(f"peak memory of scroll ingest (ru_maxrss): {peak_kib / 1024:.1f} MiB")
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
