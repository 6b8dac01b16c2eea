"""Latency of ``ms.search`` in each mode on the all-BEAM store, against a bare numpy scan.

Run: ``.venv/bin/python benchmarks/bench_hybrid.py [--cache DIR] [--vectors-cache FILE]
[--queries 200] [--data DIR] [--save FILE | --expect FILE]``

1. Build (once; reused from ``--cache``) the store of ``bench_search.py``: every BEAM chat
   present (100K, 500K, the 1M chats that exist) in one store, about 60,000 rows.
2. Give every row its vectors: one per window of 254 word pieces, as ``embed_pending`` would
   (the window count comes from the real tokenizer, so the matrix has its real size). A window
   whose vector is in ``--vectors-cache`` (filled by earlier benchmark runs) gets that vector;
   the others get a seeded random unit vector. Embedding all 60,000 rows for real takes hours
   on two shared cores; latency depends on the number and size of the vectors, not their
   values, so this measures time only -- retrieval quality is ``scroll bench retrieval``'s job.
3. Queries: the first ``--queries`` BEAM probing questions, as in ``bench_search.py``. Per
   question, in one loop: ``ms.search(q, k=10)`` with ``mode="bm25"``, ``"semantic"`` and
   ``"hybrid"``, and the bare scan a numpy user would write: the query encoded once more, one
   ``matrix @ vector`` over every window vector of the store as one float32 matrix (what the
   channel scanned before it kept one mean vector per row), and ``argpartition``. Wall clock
   (the target is a latency) and CPU time of every thread of the process.
4. Also: the first hybrid query of a fresh process (encoder load plus reading every vector),
   and the process's peak RSS after it.

Prints the median and p95 of each, and the ratios. Numbers only; nothing is asserted but
``--expect``.

5. ``--save FILE`` writes a digest of the whole result (rows, snippets, notes, flags) of
   ``ms.search`` in semantic and hybrid mode, unfiltered and with ``role="user"``, for every
   BEAM probing question (1,800); ``--expect FILE`` recomputes them and exits 1 naming the
   queries whose results changed. Run ``--save`` with the old code (``PYTHONPATH=<old
   checkout>/src``) and ``--expect`` with the new: the proof that a speed-up changed no hit,
   no order and no snippet.
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _compare import load_average, p95
from bench_search import DEFAULT_DATA, build_store, digest, questions, save_or_expect

from scrollctx.log import EventLog
from scrollctx.surface import Budgets, load_encoder, open_surface
from scrollctx.surface._semantic_model import MODEL_NAME, WINDOW_PIECES

_MARK = "vectors.done"


def fill_vectors(db: Path, cache: Path | None) -> dict[str, int]:
    """Give every row of ``db`` its windows' vectors (once; see the module docstring)."""
    marker = db.parent / _MARK
    if marker.is_file():
        real, random = (int(x) for x in marker.read_text().split())
        return {"real": real, "random": random}
    encoder = load_encoder()
    known = _cache_reader(cache)
    rng = np.random.default_rng(15)
    counts = {"real": 0, "random": 0}
    with EventLog.open(db) as log:
        last = log.last_seq()
        for start in range(0, last, 2000):
            rows = log.execute(
                "SELECT seq, content FROM conversation_history WHERE seq > ? AND seq <= ? "
                "AND searchable = 1 ORDER BY seq",
                (start, start + 2000),
            )
            windows = encoder.windows_many([str(r[1]) for r in rows])
            batch = []
            for (seq, _), wins in zip(rows, windows, strict=True):
                for w, window in enumerate(wins):
                    vector = known(encoder.name, window)
                    counts["real" if vector is not None else "random"] += 1
                    if vector is None:
                        vector = rng.standard_normal(encoder.dim).astype(np.float32)
                        vector /= np.linalg.norm(vector)
                    batch.append((int(seq), w, vector.astype("<f2").tobytes()))
            log.append_embeddings(encoder.name, encoder.dim, min(start + 2000, last), batch)
    marker.write_text(f"{counts['real']} {counts['random']}")
    return counts


def _cache_reader(cache: Path | None):  # type: ignore[no-untyped-def]
    import sqlite3

    conn = sqlite3.connect(cache) if cache is not None and cache.is_file() else None

    def lookup(model: str, window: list[int]) -> np.ndarray | None:
        if conn is None:
            return None
        key = hashlib.sha256((f"{model}|" + ",".join(map(str, window))).encode()).digest()
        row = conn.execute("SELECT v FROM vectors WHERE key = ?", (key,)).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    return lookup


def cold_start(db: Path, question: str) -> str:
    """Run the first hybrid query in a fresh process; return its timing and peak RSS line."""
    code = (
        "import resource, sys, time; from scrollctx.surface import open_surface;"
        "t = time.perf_counter(); ms = open_surface(sys.argv[1]);"
        "ms.search(sys.argv[2], k=10, mode='hybrid'); first = time.perf_counter() - t;"
        "t = time.perf_counter(); ms.search(sys.argv[2], k=10, mode='hybrid');"
        "print(f'first hybrid query {first:.2f} s (then {1000*(time.perf_counter()-t):.1f} ms),"
        " peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB')"
    )
    done = subprocess.run([sys.executable, "-c", code, str(db), question], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.strip()


def window_matrix(db: Path) -> np.ndarray:
    """Every window vector of the store as one float32 matrix: the bare scan's data."""
    with EventLog.open(db) as log:
        rows = log.execute(
            "SELECT vector FROM conversation_embeddings WHERE model = ? ORDER BY seq, window",
            (MODEL_NAME,),
        )
    return (
        np.frombuffer(b"".join(r[0] for r in rows), dtype="<f2")
        .reshape(len(rows), -1)
        .astype(np.float32)
    )


def measure(db: Path, queries: list[str]) -> dict[str, list[float]]:
    """Time the three modes and the bare scan on every question, interleaved."""
    ms = open_surface(db)
    ms.search(queries[0], k=10, mode="hybrid")  # load the encoder and the vectors
    matrix = window_matrix(db)
    encoder = load_encoder()

    def bare(question: str) -> object:
        scores = matrix @ encoder.encode_query(question)
        return np.argpartition(-scores, 10)[:10]

    runs = {
        "bm25": lambda q: ms.search(q, k=10, mode="bm25"),
        "semantic": lambda q: ms.search(q, k=10, mode="semantic"),
        "hybrid": lambda q: ms.search(q, k=10, mode="hybrid"),
        "bare scan": bare,
    }
    for question in queries[:10]:
        for run in runs.values():
            run(question)
    times: dict[str, list[float]] = {name: [] for name in runs}
    times |= {f"{name} cpu": [] for name in runs}
    for question in queries:
        for name, run in runs.items():
            started, clock = time.perf_counter(), time.process_time()
            run(question)
            times[name].append(time.perf_counter() - started)
            times[f"{name} cpu"].append(time.process_time() - clock)
    ms.close()
    return times


def results(db: Path, queries: list[str]) -> dict[str, list[object]]:
    """Every checked variant's digest and seqs, per query (see ``--save``)."""
    # A budget no search reaches even on a loaded machine: a cut search is not a result.
    ms = open_surface(db, budgets=Budgets(seconds=120.0))
    ms.search(queries[0], k=10, mode="hybrid")  # load the vectors outside any compared search
    variants = {
        "semantic": {"mode": "semantic"},
        "hybrid": {"mode": "hybrid"},
        "semantic role=user": {"mode": "semantic", "role": "user"},
        "hybrid role=user": {"mode": "hybrid", "role": "user"},
    }
    found: dict[str, list[object]] = {name: [] for name in variants}
    for question in queries:
        for name, options in variants.items():
            result = ms.search(question, k=10, **options)  # type: ignore[arg-type]
            found[name].append([digest(result), [r["seq"] for r in result]])
    ms.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/scroll-bench-hybrid"))
    parser.add_argument("--vectors-cache", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--save", type=Path, help="write the result digests here, then stop")
    parser.add_argument("--expect", type=Path, help="compare the results with a --save file")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    info = build_store(args.data, args.cache)
    db = args.cache / "history.db"
    counts = fill_vectors(db, args.vectors_cache)
    if args.save or args.expect:
        every = questions(args.data, 10**6)
        return save_or_expect(args, info, results(db, every), every)
    queries = questions(args.data, args.queries)
    print(
        f"store: {info['chats']} BEAM chats, {info['rows']} rows, "
        f"{counts['real'] + counts['random']} vectors of {WINDOW_PIECES}-piece windows "
        f"({counts['real']} real, {counts['random']} seeded random)"
    )
    print(f"start: {load_average()}", flush=True)
    print(cold_start(db, queries[0]), flush=True)
    times = measure(db, queries)
    print(f"{len(queries)} queries, k = 10 (wall clock; CPU time of every thread)")
    for name in ("bm25", "semantic", "hybrid", "bare scan"):
        wall, cpu = times[name], times[f"{name} cpu"]
        print(
            f"{name + ':':<11} median {1000 * statistics.median(wall):7.2f} ms   "
            f"p95 {1000 * p95(wall):7.2f} ms   CPU median {1000 * statistics.median(cpu):7.2f} ms"
        )
    bare = statistics.median(times["bare scan"])
    for name in ("semantic", "hybrid"):
        print(f"ratio {name} / bare scan (medians): {statistics.median(times[name]) / bare:.2f}x")
    print(
        f"this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    )
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
