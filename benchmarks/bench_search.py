"""Search latency of ``ms.search`` against the bare FTS5 query it is built on.

Run: ``.venv/bin/python benchmarks/bench_search.py [--cache DIR] [--queries 200] [--data DIR]``

1. Build (once; reused from ``--cache`` on later runs; use a new folder after a schema change)
   the largest store the data allows: every BEAM chat present (100K, 500K and the 1M chats that
   exist) in one store.
2. Queries: the first ``--queries`` BEAM probing questions (tiers 100K, 500K, 1M; chats in
   numeric order; questions in file order), deterministic.
3. Per query, in the same loop: ``ms.search(q, k=10)`` over the whole store, and the bare
   ``SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? ORDER BY
   rank LIMIT 10`` with the question compiled the simplest safe way: every whitespace token as
   an FTS5 string (quotes doubled), joined with ``OR`` (the AND form is timed too; it usually
   matches nothing for a whole question, so it is the cheap floor). A fourth line runs the FTS5
   statements ``ms.search`` itself compiles (its AND pass, then, when that found fewer than 10,
   its OR pass built from document frequencies, with the same bm25 weights) on the FTS table
   alone: the gap between it and ``ms.search`` is the surface's own cost (the join with the log
   table, filters, snippets, shaping).
4. The cost of per-event checksums: ``ms.expand(hits)`` of those 10 hits, and both calls again on
   a surface whose checksum checks are switched off (a subclass made here, for this measure
   only); the ratios verified / unverified are the cost of the checks.

Prints the median and p95 of each and the ratios. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog
from scrollctx.surface import BM25_WEIGHTS, Budgets, MemorySurface, open_surface

# Private on purpose: this measures exactly the statements ms.search compiles.
from scrollctx.surface._broaden import TermStats, broad_expression
from scrollctx.surface._filters import Binding
from scrollctx.surface._query import parse_query

SIZES = ("100K", "500K", "1M")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BARE_SQL = (
    "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? "
    "ORDER BY rank LIMIT 10"
)
WEIGHTED_SQL = (
    "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? "
    f"AND rank MATCH 'bm25({', '.join(str(w) for w in BM25_WEIGHTS)})' ORDER BY rank LIMIT ?"
)
_MARKER = "complete.json"


def chat_folders(data: Path) -> list[Path]:
    """Return every BEAM chat folder, tiers in order, chats numerically."""
    folders = []
    for size in SIZES:
        found = [p for p in (data / "beam" / "chats" / size).iterdir() if p.is_dir()]
        folders += sorted(found, key=lambda p: int(p.name))
    return folders


def build_store(data: Path, cache: Path) -> dict[str, Any]:
    """Ingest every BEAM chat into ``cache`` unless a completed build is already there."""
    marker = cache / _MARKER
    if marker.is_file():
        return dict(json.loads(marker.read_text(encoding="utf-8")))
    if (cache / "history.db").exists():
        raise SystemExit(f"{cache} holds an unfinished build; remove it or pick another --cache")
    chats = [f / "chat.json" for f in chat_folders(data) if (f / "chat.json").is_file()]
    started = time.perf_counter()
    with EventLog.open(cache / "history.db") as log:
        for chat in chats:
            ingest_path(log, chat, format="beam")
        rows = log.count()
    info: dict[str, Any] = {
        "chats": len(chats),
        "rows": rows,
        "build_seconds": round(time.perf_counter() - started, 1),
        "db_bytes": (cache / "history.db").stat().st_size,
    }
    marker.write_text(json.dumps(info), encoding="utf-8")
    return info


def questions(data: Path, limit: int) -> list[str]:
    """Return the first ``limit`` BEAM probing questions in a fixed order."""
    found: list[str] = []
    for folder in chat_folders(data):
        path = folder / "probing_questions" / "probing_questions.json"
        if not path.is_file():
            continue
        for items in json.loads(path.read_text(encoding="utf-8")).values():
            found += [str(item["question"]) for item in items]
        if len(found) >= limit:
            break
    return found[:limit]


def bare_match(question: str, joiner: str) -> str:
    """Compile a question into FTS5: each whitespace token quoted, joined by ``joiner``."""
    tokens = ['"' + token.replace('"', '""') + '"' for token in question.split()]
    return f" {joiner} ".join(tokens)


def p95(values: list[float]) -> float:
    """Return the 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, int(round(0.95 * len(ordered))) - 1)]


def same_passes(conn: sqlite3.Connection, stats: TermStats, question: str) -> list[int]:
    """Run ms.search's own AND and OR statements on the FTS table alone (rows not merged)."""
    parsed = parse_query(question)
    strict = parsed.and_expression()
    hits = [r[0] for r in conn.execute(WEIGHTED_SQL, (strict, 10))] if strict else []
    if len(hits) < 10:
        broad = broad_expression(parsed, stats)
        if broad is not None and broad != strict:
            hits += [r[0] for r in conn.execute(WEIGHTED_SQL, (broad, 10 + len(hits)))]
    return hits


class UnverifiedSurface(MemorySurface):
    """``ms`` with its checksum checks switched off: the baseline of what the checks cost."""

    def _verify_row(self, row: dict[str, Any]) -> None:
        pass


def measure(db: Path, queries: list[str]) -> dict[str, list[float]]:
    """Time ``ms.search``, ``ms.expand`` and the bare queries on every question, interleaved."""
    ms = open_surface(db)
    unverified = UnverifiedSurface(db, Binding(None, None, None), Budgets())
    hits = {q: ms.search(q, k=10) for q in queries}
    # The log attached as ``hist``, read-only, the way the surface sees it.
    conn = sqlite3.connect("file::memory:", uri=True)
    conn.execute("ATTACH DATABASE ? AS hist", (f"file:{db}?mode=ro",))
    stats = TermStats(conn)
    runs: dict[str, Callable[[str], object]] = {
        "ms.search": lambda q: ms.search(q, k=10),
        "bare OR": lambda q: conn.execute(BARE_SQL, (bare_match(q, "OR"),)).fetchall(),
        "bare AND": lambda q: conn.execute(BARE_SQL, (bare_match(q, "AND"),)).fetchall(),
        "ms passes": lambda q: same_passes(conn, stats, q),
        "unverified search": lambda q: unverified.search(q, k=10),
        "ms.expand": lambda q: ms.expand(hits[q]),
        "unverified expand": lambda q: unverified.expand(hits[q]),
    }
    for question in queries[:10]:  # warm the page cache and statement caches
        for run in runs.values():
            run(question)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for question in queries:
        for name, run in runs.items():
            started = time.perf_counter()
            run(question)
            times[name].append(time.perf_counter() - started)
    conn.close()
    ms.close()
    unverified.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument(
        "--cache", type=Path, default=Path("/tmp/scroll-bench-search"), help="store cache folder"
    )
    parser.add_argument("--queries", type=int, default=200, help="how many questions to time")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    info = build_store(args.data, args.cache)
    queries = questions(args.data, args.queries)
    times = measure(args.cache / "history.db", queries)
    print(
        f"store: {info['chats']} BEAM chats, {info['rows']} rows, "
        f"{int(info['db_bytes']) / 1e6:.0f} MB (built in {info['build_seconds']} s)"
    )
    print(f"{len(queries)} queries, k = 10")
    for name, values in times.items():
        print(
            f"{name + ':':<18} median {1000 * statistics.median(values):7.2f} ms   "
            f"p95 {1000 * p95(values):7.2f} ms"
        )
    ours = statistics.median(times["ms.search"])
    for name in ("bare OR", "bare AND", "ms passes"):
        print(f"ratio ms.search / {name} (medians): {ours / statistics.median(times[name]):.2f}x")
    for call in ("search", "expand"):
        checked = statistics.median(times[f"ms.{call}"])
        print(
            f"ratio ms.{call} / unverified {call} (medians, the checksum checks): "
            f"{checked / statistics.median(times[f'unverified {call}']):.3f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
