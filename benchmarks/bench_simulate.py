"""``scroll simulate`` end to end, this code against an older checkout, with identical output.

Run: ``.venv/bin/python benchmarks/bench_simulate.py --before SRC [--rounds 3] [--steps 2000]
[--output-kb 8] [--budget 32000] [--commits 100]``

``SRC`` is the ``src`` folder of the code to compare with (``git archive main src | tar -x -C
/tmp/before``). Each round runs ``scroll simulate --steps N --output-kb K --budget C --json``
as a fresh process once with this code and once with ``PYTHONPATH=SRC``, in an order that
alternates from round to round, and records each run's wall time and CPU time (user + system
of the child). Each command uses its own temporary store, so every model call waits for a
durable commit as in a real session. The JSON documents must be identical apart from the
timing fields; the script exits 1 naming the fields that differ. Printed: wall and CPU per
side (min / median / max over rounds) and the before / now ratios computed per round.

The durability floor: every model call waits for one durable commit (an fsync of the log's
``-wal``), so no code that keeps that rule runs faster than ``calls`` commits. After each
round the script times ``--commits`` commits of one 64 KiB row (about one model call's WAL
pages) in a WAL database with ``synchronous=FULL`` in the folder the stores use, and prints
the floor (calls x the median over all rounds) and the best wall ratio over the before side
it allows. (A bare fdatasync of a file there sometimes took 0.1 ms while the commits took 4.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _compare import load_average, ratio_spread, spread

TIMINGS = ("elapsed_s", "final_view_build_ms", "max_view_build_ms")
_COMMAND = "import sys; from scrollctx.cli import run; sys.exit(run(sys.argv[1:]))"


def run_simulate(arguments: list[str], before: Path | None) -> tuple[float, float, dict[str, Any]]:
    """Run ``scroll simulate`` once; return (wall s, CPU s, the JSON without timing fields)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("SCROLL_STORE", None)  # a temporary store each time
    if before is not None:
        env["PYTHONPATH"] = str(before)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _COMMAND, "simulate", *arguments, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    document = json.loads(done.stdout)
    for name in TIMINGS:
        document.pop(name)
    return wall, cpu, document


def commit_seconds(count: int) -> list[float]:
    """Seconds of each of ``count`` durable commits of one 64 KiB row (about the WAL pages of
    one model call's commit), in a WAL database with ``synchronous=FULL`` like the log's."""
    with tempfile.TemporaryDirectory(prefix="scroll-floor-") as folder:
        conn = sqlite3.connect(Path(folder) / "floor.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("CREATE TABLE pages (data BLOB)")
            times = []
            for _ in range(count):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO pages VALUES (randomblob(65536))")
                started = time.perf_counter()
                conn.execute("COMMIT")
                times.append(time.perf_counter() - started)
        finally:
            conn.close()
    return times


def differences(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """The names of the fields whose values differ."""
    return sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="src folder of older code")
    parser.add_argument("--rounds", type=int, default=3, help="before/now pairs")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--output-kb", type=float, default=8.0)
    parser.add_argument("--budget", type=int, default=32_000)
    parser.add_argument("--commits", type=int, default=100, help="floor commits per round")
    args = parser.parse_args(argv)
    arguments = [
        "--steps", str(args.steps), "--output-kb", str(args.output_kb),
        "--budget", str(args.budget),
    ]  # fmt: skip
    print(f"scroll simulate {' '.join(arguments)}; {args.rounds} rounds; {load_average()}")
    sides: dict[str, list[tuple[float, float]]] = {"now": [], "before": []}
    reference: dict[str, Any] | None = None
    commits: list[list[float]] = []
    for round_ in range(args.rounds):
        order = ["before", "now"] if round_ % 2 == 0 else ["now", "before"]
        for side in order:
            wall, cpu, document = run_simulate(arguments, args.before if side == "before" else None)
            reference = reference if reference is not None else document
            changed = differences(reference, document)
            if changed:
                print(f"round {round_ + 1}, {side}: the output differs in {', '.join(changed)}")
                return 1
            sides[side].append((wall, cpu))
        if args.commits > 0:
            commits.append(commit_seconds(args.commits))
        print(f"round {round_ + 1}/{args.rounds} done; {load_average()}", flush=True)
    for side, runs in sides.items():
        print(f"{side + ':':<8} wall {spread([w for w, _ in runs], 1, 's')}")
        print(f"{'':<8} CPU  {spread([c for _, c in runs], 1, 's')}")
    for index, what in ((0, "wall"), (1, "CPU")):
        ratios = [b[index] / n[index] for b, n in zip(sides["before"], sides["now"], strict=True)]
        print(f"ratio before / now ({what}): {ratio_spread(ratios)}")
    print(f"JSON output identical apart from {', '.join(TIMINGS)} in all {2 * args.rounds} runs")
    if reference is not None and reference["calls"] and commits:
        commit = statistics.median(t for times in commits for t in times)
        floor = reference["calls"] * commit
        before = statistics.median(w for w, _ in sides["before"])
        rounds = spread([statistics.median(times) for times in commits], 1000, "ms")
        print(f"durable commits after each round ({args.commits} each), medians: {rounds}")
        print(
            f"durability floor: {reference['calls']} model calls x one commit ({commit * 1000:.2f}"
            f" ms) = {floor:.1f} s wall; with no CPU at all, before / now wall would be at most "
            f"{before / floor:.2f}x"
        )
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
