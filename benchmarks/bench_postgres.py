"""The shared (PostgreSQL) Event Log against the SQLite one, measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_postgres.py [--url postgresql://…] [--repeats 3]``

Without ``--url`` a throwaway PostgreSQL server is started on loopback (``initdb`` into a temp
folder, PostgreSQL's default durability: fsync on) and removed at the end. Events are real BEAM
turns (100K chats, cycled to the sizes needed, each with its own dedup key); SQLite runs with
the log's own settings (WAL, ``synchronous=FULL``). Every figure is measured ``--repeats``
times, the two sides alternating, and printed as min / median / max with the ratio of medians.

1. Append throughput (rows/s): batches of 500 events, 1 writer process and 4 at once, each
   writing ``--rows`` events; SQLite's writers share one file, PostgreSQL's one database.
2. Replica catch-up: the time :meth:`refresh` takes to bring a replica up by 1 new event, and
   by 100,000; the baseline is appending the same 100,000 events to a local SQLite log, the
   work a replica must do anyway (fetching them is the difference).
3. ``ms.search`` latency (k=10) over the replica and over a native SQLite store holding the
   same events (``scroll store copy``), on ``--queries`` queries taken from the events' words.

Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, Kind, NewEvent, copy_log
from scrollctx.log._postgres import PostgresEventStore
from scrollctx.surface import open_surface

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
BATCH = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an empty database to use (default: start a server)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=20_000, help="events per writer")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    texts = beam_texts(args.data)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {len(texts)} distinct BEAM turns")
    with database(args.url) as make_url, tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        bench_appends(make_url, work, texts, args.rows, args.repeats)
        bench_catch_up(make_url, work, texts, args.repeats)
        bench_search(make_url, work, texts, args.queries, args.repeats)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


# -- the three measures ---------------------------------------------------------------------


def bench_appends(
    make_url: Callable[[], str], work: Path, texts: list[str], rows: int, repeats: int
) -> None:
    texts_file = work / "texts.json"
    texts_file.write_text(json.dumps(texts))
    for writers in (1, 4):
        sqlite_rates, pg_rates = [], []
        for repeat in range(repeats):
            folder = work / f"append-{writers}-{repeat}"
            sqlite = f"sqlite:{folder / 'history.db'}"
            sqlite_rates.append(run_writers(sqlite, writers, rows, texts_file))
            pg_rates.append(run_writers(make_url(), writers, rows, texts_file))
        report(
            f"append rows/s, {writers} writer(s)", sqlite_rates, pg_rates, "SQLite", "PostgreSQL"
        )


def bench_catch_up(make_url: Callable[[], str], work: Path, texts: list[str], repeats: int) -> None:
    one_local, one_replica, many_local, many_replica = [], [], [], []
    for repeat in range(repeats):
        folder = work / f"catch-up-{repeat}"
        url = make_url()
        with PostgresEventStore.open(url, replica_path=folder / "replica" / "history.db") as pg:
            pg.append_many(events(texts, 100_000, "bulk"))
            started = time.perf_counter()
            pg.refresh()
            many_replica.append(time.perf_counter() - started)
            with EventLog.open(folder / "local" / "history.db") as local:
                started = time.perf_counter()
                for chunk in batches(events(texts, 100_000, "bulk"), 2000):
                    local.append_many(chunk)
                many_local.append(time.perf_counter() - started)
                for i in range(20):
                    event = events(texts, 1, f"one-{i}")
                    pg.append_many(event)
                    started = time.perf_counter()
                    pg.refresh()
                    one_replica.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    local.append_many(event)
                    one_local.append(time.perf_counter() - started)
    report("1 new event: seconds", one_local, one_replica, "local append", "replica refresh")
    report(
        "100,000 new events: seconds", many_local, many_replica, "local append", "replica refresh"
    )


def bench_search(
    make_url: Callable[[], str], work: Path, texts: list[str], queries: int, repeats: int
) -> None:
    native_path = work / "native" / "history.db"
    with EventLog.open(native_path) as native:
        for chunk in batches(events(texts, len(texts), "search"), 2000):
            native.append_many(chunk)
        with PostgresEventStore.open(make_url(), replica_path=work / "rep" / "history.db") as pg:
            copy_log(native, pg)
            pg.refresh()
            replica_path = pg.path
    words = query_words(texts, queries)
    native_times: list[float] = []
    replica_times: list[float] = []
    with open_surface(native_path) as on_native, open_surface(replica_path) as on_replica:
        for _ in range(repeats):
            for query in words:
                for surface, sink in ((on_native, native_times), (on_replica, replica_times)):
                    started = time.perf_counter()
                    surface.search(query, k=10)
                    sink.append(time.perf_counter() - started)
    report(f"ms.search seconds ({len(words)} queries)", native_times, replica_times,
           "native SQLite", "replica")  # fmt: skip


# -- writers, data, servers -----------------------------------------------------------------


def run_writers(target: str, writers: int, rows: int, texts_file: Path) -> float:
    """Start ``writers`` processes appending ``rows`` events each; return rows per second.

    Each writer reports when its first append started and its last ended (wall clock), so
    process start-up is not counted: the rate is all rows over the span the appends covered.
    """
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--writer", target, f"w{n}", str(rows), str(texts_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    spans = [tuple(map(float, p.communicate()[0].split())) for p in procs]
    if any(p.returncode != 0 for p in procs):
        raise SystemExit(f"a writer to {target} failed")
    return writers * rows / (max(end for _, end in spans) - min(start for start, _ in spans))


def writer(target: str, name: str, rows: int, texts_file: Path) -> None:
    """One writer process: append ``rows`` events in batches of ``BATCH``; print its span."""
    texts = json.loads(texts_file.read_text())
    if target.startswith("sqlite:"):
        store: EventLog | PostgresEventStore = EventLog.open(target.removeprefix("sqlite:"))
    else:
        store = PostgresEventStore.open(target, replica_path=Path(tempfile.mkdtemp()) / "r.db")
    todo = list(batches(events(texts, rows, name), BATCH))
    with store:
        started = time.time()
        for chunk in todo:
            store.append_many(chunk)
        print(started, time.time())


def beam_texts(data: Path) -> list[str]:
    """Every turn of the BEAM 100K chats, as text (ingested into a temporary store)."""
    with tempfile.TemporaryDirectory() as folder:
        with EventLog.open(Path(folder) / "history.db") as log:
            ingest_path(log, data / "beam" / "chats" / "100K")
            return [e.content for e in log.events_after(0, 1_000_000) if e.content]


def events(texts: list[str], count: int, tag: str) -> list[NewEvent]:
    return [
        NewEvent(
            session_id=f"{tag}-{i // 400}",
            kind=Kind.CONVERSATION,
            role="user" if i % 2 == 0 else "assistant",
            content=texts[i % len(texts)],
            dedup_key=f"{tag}:{i}",
        )
        for i in range(count)
    ]


def batches(items: list[NewEvent], size: int) -> Iterator[list[NewEvent]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def query_words(texts: list[str], count: int) -> list[str]:
    """Deterministic queries: two content words from every n-th turn."""
    step = max(1, len(texts) // count)
    found = []
    for text in texts[::step][:count]:
        words = [w for w in re.findall(r"[A-Za-z]{5,}", text)][:2]
        if words:
            found.append(" ".join(words))
    return found


@contextmanager
def database(url: str | None) -> Iterator[Callable[[], str]]:
    """Yield a maker of fresh, empty databases (on ``url``'s server, or a throwaway one)."""
    if url is not None:
        yield lambda: url
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from postgres_server import find_bindir, throwaway_server

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found: apt-get install postgresql, or pass --url")
    with throwaway_server(bindir, durable=True) as server:
        yield lambda: server.url(server.create_database())


def report(what: str, baseline: list[float], measured: list[float], a: str, b: str) -> None:
    def line(name: str, values: list[float]) -> str:
        return (
            f"  {name:<16} min {min(values):12.5g}  median {statistics.median(values):12.5g}  "
            f"max {max(values):12.5g}  (n={len(values)})"
        )

    ratio = statistics.median(measured) / statistics.median(baseline)
    print(f"{what}\n{line(a, baseline)}\n{line(b, measured)}\n  ratio {b}/{a}: {ratio:.3f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
    else:
        main()
