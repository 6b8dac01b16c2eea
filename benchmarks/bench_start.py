"""Start-up CPU of ``scroll search`` and of the kernel worker's imports, against their baselines.

Run: ``.venv/bin/python benchmarks/bench_start.py [--store DIR] [--repeats 15] [--before SRC]``

Each round runs, as fresh processes in an order that rotates from round to round, timed in CPU
seconds (user + system of the child, from ``getrusage``):

- ``python -c "import sqlite3"``: the floor of any Python tool that reads SQLite;
- ``scroll search --store DIR QUESTION`` (what the console script runs; output discarded);
- ``python -c "import scrollctx.kernel._worker"``: what the sandboxed worker imports before its
  ready frame (the rest of a worker start is bwrap, namespaces and self-tests, wall time that
  ``benchmarks/bench_kernel.py --only-start`` measures);
- with ``--before SRC`` (the ``src`` folder of another checkout, e.g. from
  ``git archive main src``), the two scrollctx commands again with ``PYTHONPATH=SRC``: the code
  before a change, measured in the same run.

and, in this process, the query itself: ``open_surface`` + ``ms.search(QUESTION, k=10)`` +
``close``, which is what the command does after its imports. Round i asks the i-th BEAM probing
question. Issue 19's target is ``scroll search <= 2 x (import sqlite3 + the query)``; the script
prints that ratio per round (min / median / max), and the modules with the most import time in
one ``python -X importtime`` run of the command.

The store defaults to the one ``benchmarks/bench_search.py`` builds (all BEAM chats); it is
built here the same way when missing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from _compare import child_cpu_seconds, cpu_seconds, load_average, ratio_spread, rotated, spread
from bench_search import DEFAULT_DATA, build_store, questions

from scrollctx.surface import open_surface

_SEARCH = "import sys; from scrollctx.cli import run; sys.exit(run(sys.argv[1:]))"
_IMPORT = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s+(.*)")


def commands(store: Path, question: str, before: Path | None) -> dict[str, list[str]]:
    """The processes of one round, by name (``before:`` ones run with ``PYTHONPATH``)."""
    python = sys.executable
    found = {
        "import sqlite3": [python, "-c", "import sqlite3"],
        "scroll search": [python, "-c", _SEARCH, "search", "--store", str(store), question],
        "worker imports": [python, "-c", "import scrollctx.kernel._worker"],
    }
    if before is not None:
        found["before: scroll search"] = found["scroll search"]
        found["before: worker imports"] = found["worker imports"]
    return found


def environment(name: str, before: Path | None) -> dict[str, str]:
    """The child's environment: ``PYTHONPATH`` set to the older code for ``before:`` runs."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if before is not None and name.startswith("before:"):
        env["PYTHONPATH"] = str(before)
    return env


def query_cpu(store: Path, question: str) -> float:
    """CPU seconds of what ``scroll search`` does after its imports."""

    def search() -> None:
        with open_surface(store / "history.db") as ms:
            ms.search(question, k=10)

    return cpu_seconds(search)


def importtime(
    store: Path, question: str, runs: int = 5, top: int = 12
) -> list[tuple[int, int, str]]:
    """The ``top`` modules by import time (µs, the least of ``runs`` runs of ``scroll search``)."""
    argv = [sys.executable, "-X", "importtime", "-c", _SEARCH, "search", "--store", str(store)]
    least: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        done = subprocess.run([*argv, question], capture_output=True, text=True, check=True)
        for found in _IMPORT.finditer(done.stderr):
            own, cumulative, module = int(found[1]), int(found[2]), found[3].strip()
            old = least.get(module, (own, cumulative))
            least[module] = (min(own, old[0]), min(cumulative, old[1]))
    rows = [(own, cumulative, module) for module, (own, cumulative) in least.items()]
    return sorted(rows, key=lambda row: row[0], reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument(
        "--store", type=Path, default=Path("/tmp/scroll-bench-search-beam"), help="store folder"
    )
    parser.add_argument("--repeats", type=int, default=15, help="rounds")
    parser.add_argument("--before", type=Path, help="src folder of the code to compare with")
    args = parser.parse_args(argv)
    args.store.mkdir(parents=True, exist_ok=True)
    info = build_store(args.data, args.store)
    asked = questions(args.data, args.repeats)
    print(f"store: {info['rows']} rows; {args.repeats} rounds; {load_average()}", flush=True)
    times: dict[str, list[float]] = {}
    for turn, question in enumerate(asked):
        runs = commands(args.store, question, args.before)
        for name in rotated(list(runs), turn):
            cpu = child_cpu_seconds(
                runs[name],
                env=environment(name, args.before),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            times.setdefault(name, []).append(cpu)
        times.setdefault("the query", []).append(query_cpu(args.store, question))
    for name, values in times.items():
        print(f"{name + ':':<24} {spread(values)}")
    floor = [a + b for a, b in zip(times["import sqlite3"], times["the query"], strict=True)]
    for name in ("scroll search", "before: scroll search"):
        if name in times:
            ratios = [a / b for a, b in zip(times[name], floor, strict=True)]
            print(f"ratio {name} / (import sqlite3 + the query): {ratio_spread(ratios)}")
    if args.before is not None:
        for name in ("scroll search", "worker imports"):
            ratios = [a / b for a, b in zip(times[name], times[f"before: {name}"], strict=True)]
            print(f"ratio {name} now / before: {ratio_spread(ratios)}")
    print(
        "largest imports of scroll search by self time (least of 5 runs; self µs, cumulative µs):"
    )
    for own, cumulative, module in importtime(args.store, asked[0]):
        print(f"  {own:>8} {cumulative:>8}  {module}")
    print(f"median of the query alone: {1000 * statistics.median(times['the query']):.2f} ms")
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
