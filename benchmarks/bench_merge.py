"""``ms.search`` CPU on a store as built against the same store with its index merged, same run.

Run: ``.venv/bin/python benchmarks/bench_merge.py [--scale ROWS] [--queries 200] [--rounds 4]
[--cache DIR] [--work DIR]``

The store is the one ``benchmarks/bench_search.py`` builds (``--scale`` as there; built into
``--cache`` when missing). It is copied to ``--work`` and the copy's full-text index merged with
``EventLog.merge_search_index`` (what ``scroll ingest`` runs after a bulk import), timed in wall
and CPU seconds. Then each round opens a fresh surface on each store, in an order that
alternates from round to round, and times ``ms.search(q, k=10)`` for every question in CPU
seconds. Printed: the FTS5 segments of each store, each store's per-round medians
(min / median / max), the merged / as built ratio per round, and whether every query returned
the same rows from both; exits 1 if one did not.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _compare import load_average, ratio_spread, spread
from bench_search import open_cache, questions, store_arguments

from scrollctx.log import EventLog
from scrollctx.surface import open_surface


def segments(db: Path) -> int:
    """The number of FTS5 segments of the store's full-text index."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT count(DISTINCT segid) FROM conversation_history_fts_idx")
        return int(row.fetchone()[0])
    finally:
        conn.close()


def merged_copy(store: Path, work: Path) -> tuple[Path, float, float]:
    """Copy ``store`` into ``work`` and merge the copy's index; return (db, wall s, CPU s)."""
    shutil.copytree(store, work, dirs_exist_ok=True)
    db = work / "history.db"
    started, cpu = time.perf_counter(), time.process_time()
    with EventLog.open(db) as log:
        log.merge_search_index()
    return db, time.perf_counter() - started, time.process_time() - cpu


def timed_round(db: Path, asked: list[str]) -> tuple[float, list[Any]]:
    """Median CPU seconds of ``ms.search`` over ``asked`` on a fresh surface, and the rows."""
    timings, found = [], []
    with open_surface(db) as ms:
        for question in asked:
            started = time.process_time()
            rows = ms.search(question, k=10)
            timings.append(time.process_time() - started)
            found.append(rows)
    return statistics.median(timings), found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(parser)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of both stores")
    parser.add_argument("--work", type=Path, help="where the merged copy goes (default: temp)")
    args = parser.parse_args(argv)
    cache, info = open_cache(args)
    asked = questions(args.data, args.queries)
    with tempfile.TemporaryDirectory(prefix="scroll-bench-merge-") as scratch:
        merged, wall, cpu = merged_copy(cache, args.work or Path(scratch) / "merged")
        stores = {"as built": cache / "history.db", "merged": merged}
        print(f"store: {info['rows']} rows; {args.queries} queries; {load_average()}")
        print(f"merge: {wall:.2f} s wall, {cpu:.2f} s CPU")
        for name, db in stores.items():
            print(f"{name + ':':<10} {segments(db)} FTS5 segments")
        medians: dict[str, list[float]] = {name: [] for name in stores}
        results: dict[str, list[Any]] = {}
        for round_ in range(args.rounds):
            order = list(stores) if round_ % 2 == 0 else list(stores)[::-1]
            for name in order:
                median, found = timed_round(stores[name], asked)
                medians[name].append(median)
                results[name] = found
            print(f"round {round_ + 1}/{args.rounds} done; {load_average()}", flush=True)
    for name, values in medians.items():
        print(f"ms.search, {name + ':':<10} medians {spread(values)}")
    ratios = [m / b for m, b in zip(medians["merged"], medians["as built"], strict=True)]
    print(f"ratio merged / as built: {ratio_spread(ratios)}")
    changed = [q for q, a, b in zip(asked, *results.values(), strict=True) if a != b]
    print(f"queries whose rows differ: {len(changed)} of {len(asked)}")
    print(f"end: {load_average()}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
