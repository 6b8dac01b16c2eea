"""Transcript import throughput against BEAM ingestion, and ``scroll watch`` latency.

Run: ``.venv/bin/python benchmarks/bench_transcripts.py [--repeats 5] [--lines 40] [--data DIR]``

1. Throughput: ``ingest_path`` imports the Claude Code fixtures, the Codex fixtures and (the
   baseline) the BEAM 100K tier, each into a fresh store, in alternating order, ``--repeats``
   times. Printed per input: events/s and MB/s of source file bytes (min / median / max over
   the repeats), and the ratio of the medians to BEAM's. MB counts the imported files only
   (BEAM's ``chat.json`` files, not its question and topic files).
2. Watch latency: a real ``scroll watch`` process follows a folder while this script appends
   one Claude Code line at a time (each with a unique word) and polls the store's full-text
   index until the line's row is searchable; the time from the write to that moment, over
   ``--lines`` lines, for file-system events and for ``--poll --interval 0.1``.

Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


IMPORTED = {"claude-code": "**/*.jsonl", "codex": "*.jsonl", "beam-100K": "*/chat.json"}
"""The files of each input that are imported (BEAM's folders also hold questions and topics)."""


def source_bytes(name: str, path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob(IMPORTED[name]))


def import_once(path: Path, work: Path) -> tuple[int, float]:
    """Import ``path`` into a fresh store; return (events added, seconds)."""
    store = Path(tempfile.mkdtemp(dir=work))
    with EventLog.open(store / "history.db") as log:
        started = time.perf_counter()
        report = ingest_path(log, path)
        return report.events_added, time.perf_counter() - started


def throughput(inputs: dict[str, Path], repeats: int, work: Path) -> dict[str, list[float]]:
    """Alternate the inputs ``repeats`` times; return name -> [events/s ...] and MB/s."""
    rates: dict[str, list[float]] = {
        f"{name} {unit}": [] for name in inputs for unit in ("ev", "mb")
    }
    for _ in range(repeats):
        for name, path in inputs.items():
            events, seconds = import_once(path, work)
            rates[f"{name} ev"].append(events / seconds)
            rates[f"{name} mb"].append(source_bytes(name, path) / 1e6 / seconds)
    return rates


def claude_line(session: str, word: str) -> bytes:
    record = {
        "type": "user",
        "uuid": str(uuid.uuid4()),
        "parentUuid": None,
        "sessionId": session,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/bench",
        "message": {"role": "user", "content": f"latency probe {word}"},
    }
    return (json.dumps(record) + "\n").encode()


def searchable(db: Path, word: str) -> bool:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return False
    try:
        sql = "SELECT 1 FROM conversation_history_fts WHERE conversation_history_fts MATCH ?"
        return conn.execute(sql, (word,)).fetchone() is not None
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def watch_latency(lines: int, work: Path, extra: list[str]) -> list[float]:
    """Seconds from each appended line's write to its row being searchable."""
    folder = Path(tempfile.mkdtemp(dir=work)) / "projects" / "bench"
    folder.mkdir(parents=True)
    live = folder / "session.jsonl"
    session = str(uuid.uuid4())
    live.write_bytes(claude_line(session, "warmup"))
    store = folder.parent.parent / "store"
    scroll = Path(sys.executable).parent / "scroll"
    proc = subprocess.Popen(
        [str(scroll), "watch", "--store", str(store), str(folder.parent), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    latencies = []
    try:
        _wait(lambda: searchable(store / "history.db", "warmup"))
        for i in range(lines):
            word = f"probe{i}x{os.getpid()}"
            with live.open("ab") as handle:
                handle.write(claude_line(session, word))
            written = time.perf_counter()
            _wait(partial(searchable, store / "history.db", word))
            latencies.append(time.perf_counter() - written)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return latencies


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the watcher did not import the line in time")
        time.sleep(0.002)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    inputs = {
        "claude-code": args.data / "transcripts" / "claude-code",
        "codex": args.data / "transcripts" / "codex",
        "beam-100K": args.data / "beam" / "chats" / "100K",
    }
    missing = [str(p) for p in inputs.values() if not p.exists()]
    if missing:
        print(f"missing inputs: {', '.join(missing)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="scroll-bench-transcripts-") as scratch:
        work = Path(scratch)
        rates = throughput(inputs, args.repeats, work)
        print(f"import throughput, {args.repeats} alternating repeats (min / median / max)")
        for name, path in inputs.items():
            ev, mb = rates[f"{name} ev"], rates[f"{name} mb"]
            print(
                f"  {name:<12} {source_bytes(name, path) / 1e6:6.2f} MB  "
                f"{min(ev):8.0f} / {statistics.median(ev):8.0f} / {max(ev):8.0f} events/s  "
                f"{min(mb):5.2f} / {statistics.median(mb):5.2f} / {max(mb):5.2f} MB/s"
            )
        beam_ev = statistics.median(rates["beam-100K ev"])
        beam_mb = statistics.median(rates["beam-100K mb"])
        for name in ("claude-code", "codex"):
            ev_ratio = statistics.median(rates[f"{name} ev"]) / beam_ev
            mb_ratio = statistics.median(rates[f"{name} mb"]) / beam_mb
            print(f"  ratio {name} / beam-100K: {ev_ratio:.2f}x events/s, {mb_ratio:.2f}x MB/s")
        print(f"scroll watch latency, write to searchable, {args.lines} lines")
        for label, extra in (("fs events", []), ("poll 0.1 s", ["--poll", "--interval", "0.1"])):
            seconds = sorted(watch_latency(args.lines, work, extra))
            p95 = seconds[min(len(seconds) - 1, int(round(0.95 * (len(seconds) - 1))))]
            print(
                f"  {label:<11} median {statistics.median(seconds) * 1000:6.1f} ms  "
                f"p95 {p95 * 1000:6.1f} ms  max {seconds[-1] * 1000:6.1f} ms"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
