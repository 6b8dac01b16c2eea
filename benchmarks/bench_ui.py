"""Page render time of ``scroll ui`` (timeline, model call) against ``scroll view``.

Two stores: the 2,000-step simulated session of docs/view.md alone, and the same session in a
store of 60,000 events (LoCoMo and BEAM conversations imported before it). For each, the inspector
runs in real uvicorn on loopback and each page is requested over HTTP (one request at a time,
so the time is the server's render plus a loopback round trip); the baseline is ``scroll
view --session simulation`` run in the same process (restore the view from the log and print
it, stdout to a pipe), the closest thing the command line has to the model-call page. Repeats
alternate page and baseline; min / median / max are printed, and the ratio of medians.

    .venv/bin/python benchmarks/bench_ui.py --work /tmp/bench-ui --repeats 7
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
SESSION = "simulation"


def _build(folder: Path, *, filler_events: int) -> Path:
    """A store holding the 2,000-step simulation, after ``filler_events`` imported events."""
    from scrollctx.ingest import ingest_path
    from scrollctx.log import EventLog
    from scrollctx.view import simulate

    db = folder / "history.db"
    if db.is_file():
        return db
    with EventLog.open(db) as log:
        for chat in _chats() if filler_events else []:
            if log.count() >= filler_events:
                break
            ingest_path(log, chat)
        if log.count() < filler_events:
            raise SystemExit(f"only {log.count()} events of LoCoMo and BEAM under {DATA}")
        simulate(log, steps=2000, output_kb=8, budget=32_000, session_id=SESSION)
    return db


def _chats() -> list[Path]:
    """Real conversations to fill a store with: LoCoMo, then BEAM 100K and 500K chats."""
    beam = [DATA / "beam" / "chats" / size for size in ("100K", "500K")]
    chats = [chat for tier in beam for chat in sorted(tier.iterdir(), key=lambda p: int(p.name))]
    return [DATA / "locomo" / "locomo10.json", *chats]


class _Served:
    def __init__(self, db: Path) -> None:
        import uvicorn

        from scrollctx.serve.ui._app import create_app

        config = uvicorn.Config(create_app(db), host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise SystemExit("uvicorn did not start")
            time.sleep(0.01)
        self.port = int(self.server.servers[0].sockets[0].getsockname()[1])

    def get(self, path: str) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            size = len(response.read())
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}")
            return size
        finally:
            connection.close()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join()


def _scroll_view(db: Path) -> int:
    from scrollctx.cli import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(["view", "--store", str(db.parent), "--session", SESSION, "--budget", "32000"])
    if code != 0:
        raise SystemExit(f"scroll view exited {code}")
    return len(out.getvalue())


def _time(action: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    size = action()
    return (time.perf_counter() - started) * 1000, size


def _stats(samples: list[float]) -> str:
    return f"{min(samples):7.1f} / {statistics.median(samples):7.1f} / {max(samples):7.1f}"


def _measure(db: Path, repeats: int) -> None:
    from scrollctx.log import EventLog
    from scrollctx.view import call_seqs

    with EventLog.open_read_only(db) as log:
        events = log.count()
        seqs = call_seqs(log, SESSION)
    calls = len(seqs)
    middle = seqs[calls // 2]
    pages = {
        "timeline, first page": f"/timeline?session={SESSION}",
        "timeline, middle page": f"/timeline?session={SESSION}&at={middle}",
        "model call 1": f"/call?session={SESSION}&n=1",
        f"model call {calls // 2}": f"/call?session={SESSION}&n={calls // 2}",
        f"model call {calls} (last)": f"/call?session={SESSION}&n={calls}",
    }
    served = _Served(db)
    try:
        for path in pages.values():  # warm: imports, template compilation, SQLite cache
            served.get(path)
        _scroll_view(db)
        times: dict[str, list[float]] = {name: [] for name in pages}
        sizes: dict[str, int] = {}
        baseline: list[float] = []
        for _ in range(repeats):
            for name, path in pages.items():
                elapsed, sizes[name] = _time(lambda path=path: served.get(path))
                times[name].append(elapsed)
                elapsed, sizes["scroll view"] = _time(lambda: _scroll_view(db))
                baseline.append(elapsed)
    finally:
        served.stop()
    base = statistics.median(baseline)
    print(f"\nstore: {events:,} events; session {SESSION!r}: {calls:,} model calls")
    print(f"{'page':<28} {'ms min / median / max':>27} {'KB':>7} {'vs scroll view':>15}")
    for name, samples in times.items():
        ratio = statistics.median(samples) / base
        kb = sizes[name] / 1024
        print(f"{name:<28} {_stats(samples):>27} {kb:7.0f} {ratio:14.2f}x")
    print(
        f"{'scroll view (baseline)':<28} {_stats(baseline):>27} {sizes['scroll view'] / 1024:7.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-ui"), help="Store folder.")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--events", type=int, default=60_000, help="Size of the larger store.")
    args = parser.parse_args()
    started = time.perf_counter()
    alone = _build(args.work / "alone", filler_events=0)
    # The simulated session adds 10,454 events to what is imported before it.
    filled = _build(args.work / "filled", filler_events=args.events - 10_500)
    print(f"stores ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    for db in (alone, filled):
        _measure(db, args.repeats)


if __name__ == "__main__":
    main()
