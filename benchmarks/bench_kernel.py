"""Kernel latencies against baselines measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_kernel.py [--starts 15] [--cells 300] [--queries 60]
[--calls 500] [--data DIR] [--only-start]``

1. Worker start with every sandbox layer (``Kernel(...).start()``: bwrap and its namespaces,
   spawn, imports, rlimits, netns, Landlock, seccomp, self-tests, ``ms`` bound, ready frame, the
   scratch tmpfs opened and seeded), median (min-max) of ``--starts`` rounds that alternate it
   with a start without the namespaces layer and a bare ``python -I -c pass`` (the baselines);
   ``--only-start`` stops there.
2. Trivial cell round trip (``run_cell("pass")``, digest included), median of ``--cells``;
   baseline: ``exec`` of the same code in-process.
3. ``ms.search(q, k=10)`` through the kernel (one cell per query, timed by the host) against the
   same call on an in-process surface over the same store; queries are the first ``--queries``
   LoCoMo questions, over a store holding all of LoCoMo (built in a temp folder). The call is
   also timed inside the cell, which separates the sandboxed search from the round trip.
4. A bridged tool call (a cell calls a no-op host tool, timed inside the cell; each call is
   logged as two durable events) against a direct in-process call of the same function logged
   with the same two appends, in alternating rounds of 25 (``--calls`` in all); and the bridge
   alone (no Event Log attached).

Prints medians, ratios and the issue's targets. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scrollctx.ingest import ingest_path
from scrollctx.kernel import Kernel, SandboxPolicy
from scrollctx.log import EventLog, Kind, NewEvent
from scrollctx.surface import open_surface

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def noop(x: int) -> int:
    """Return ``x`` (the cheapest possible tool)."""
    return x


def timed(func: Callable[[], object]) -> float:
    started = time.perf_counter()
    func()
    return time.perf_counter() - started


def bench_start(log: EventLog, scratch: Path, starts: int) -> dict[str, list[float]]:
    """Start times of a worker with every layer, without the namespaces layer, and of a bare
    interpreter, in alternating rounds (so load changes hit all three alike)."""
    without = SandboxPolicy("best-effort", unavailable=frozenset({"namespaces"}))

    def start_and_stop(policy: SandboxPolicy) -> float:
        kernel = Kernel(event_log=log, session_id="bench", scratch=scratch, sandbox=policy)
        elapsed = timed(kernel.start)
        status = kernel.status
        if status is None or any(s.name not in policy.unavailable and not s.holds
                                 for s in status.layers):  # fmt: skip
            raise SystemExit(f"sandbox does not hold here: {status}")
        kernel.close()
        return elapsed

    def bare() -> float:
        return timed(lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True))

    start_and_stop(SandboxPolicy())  # the first start asks bwrap and the interpreter once
    times: dict[str, list[float]] = {"all": [], "without namespaces": [], "bare": []}
    for _ in range(starts):
        times["all"].append(start_and_stop(SandboxPolicy()))
        times["without namespaces"].append(start_and_stop(without))
        times["bare"].append(bare())
    return times


def spread(values: list[float]) -> str:
    """``median (min-max)`` in milliseconds."""
    median, low, high = statistics.median(values), min(values), max(values)
    return f"{median * 1000:.1f} ms ({low * 1000:.1f}-{high * 1000:.1f})"


def bench_cells(kernel: Kernel, cells: int) -> tuple[float, float]:
    namespace: dict[str, object] = {}
    code = compile("pass", "<bench>", "exec")
    kernel.run_cell("pass")
    trips = [timed(lambda: kernel.run_cell("pass")) for _ in range(cells)]
    local = [timed(lambda: exec(code, namespace)) for _ in range(cells)]  # noqa: S102
    return statistics.median(trips), statistics.median(local)


def bench_search(kernel: Kernel, db: Path, queries: list[str]) -> tuple[float, float, float]:
    """Medians: the cell as the host times it, the same call in-process, the call in the worker."""
    ms = open_surface(db)
    through, local, inside = [], [], []
    kernel.run_cell("import time")
    for query in queries:
        cell = (
            f"t = time.perf_counter()\nrows = ms.search({query!r}, k=10)\n"
            "print(time.perf_counter() - t)"
        )
        local.append(timed(lambda q=query: ms.search(q, k=10)))  # type: ignore[misc]
        result = kernel.run_cell(cell)
        if not result.ok:
            raise SystemExit(f"search cell failed: {result.error}")
        through.append(result.duration)
        inside.append(float(result.stdout))
    ms.close()
    return statistics.median(through), statistics.median(local), statistics.median(inside)


def bench_tool(kernel: Kernel, log: EventLog, calls: int) -> tuple[float, float, float]:
    """Per call: bridged (logged), direct + the same two durable log appends, direct alone.

    Rounds of 25 calls alternate between the two paths, so both see the same disk load (each
    durable append waits for an fsync); the medians of the rounds' per-call times are returned.
    """
    chunk = 25
    cell = (
        "t = time.perf_counter()\n"
        f"for i in range({chunk}):\n    noop(i)\n"
        f"print((time.perf_counter() - t) / {chunk})"
    )
    kernel.run_cell("import time")

    def direct_logged() -> None:
        for i in range(chunk):
            log.append(NewEvent(session_id="bench", kind=Kind.TOOL_CALL, name="noop",
                                tool_input={"args": [i], "kwargs": {}}))  # fmt: skip
            value = noop(i)
            log.append(NewEvent(session_id="bench", kind=Kind.TOOL_RESULT, name="noop",
                                content=json.dumps(value), tool_state="ok"))  # fmt: skip

    bridged, logged = [], []
    for _ in range(max(1, calls // chunk)):
        result = kernel.run_cell(cell)
        if not result.ok:
            raise SystemExit(f"tool cell failed: {result.error}")
        bridged.append(float(result.stdout))
        logged.append(timed(direct_logged) / chunk)
    direct = timed(lambda: [noop(i) for i in range(calls)]) / calls
    return statistics.median(bridged), statistics.median(logged), direct


def bench_transport(scratch: Path, calls: int) -> float:
    """Per bridged call with no Event Log attached (frames and dispatch only)."""
    with Kernel(scratch=scratch, tools=[noop]) as kernel:
        cell = (
            "import time\nt = time.perf_counter()\n"
            f"for i in range({calls}):\n    noop(i)\n"
            f"print((time.perf_counter() - t) / {calls})"
        )
        return float(kernel.run_cell(cell).stdout)


def locomo_questions(data: Path, limit: int) -> list[str]:
    samples = json.loads((data / "locomo" / "locomo10.json").read_text(encoding="utf-8"))
    questions = [qa["question"] for sample in samples for qa in sample.get("qa", [])]
    return questions[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--only-start", action="store_true", help="measure worker start only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-kernel-") as tmp:
        root = Path(tmp)
        log = EventLog.open(root / "store" / "history.db")
        report = ingest_path(log, args.data / "locomo" / "locomo10.json")
        print(f"store: LoCoMo, {log.count():,} events ({report})")
        times = bench_start(log, root / "scratch", args.starts)
        start, bare = statistics.median(times["all"]), statistics.median(times["bare"])
        print(f"worker start, all layers : {spread(times['all'])} median (min-max)  "
              f"(without the namespaces layer: {spread(times['without namespaces'])}; "
              f"bare python -I: {spread(times['bare'])}; ratio to bare {start / bare:.2f}x; "
              f"target < 150 ms; {args.starts} alternating rounds)")  # fmt: skip
        if args.only_start:
            return
        kernel = Kernel(event_log=log, session_id="bench", scratch=root / "scratch",
                        tools=[noop])  # fmt: skip
        with kernel:
            trip, local = bench_cells(kernel, args.cells)
            print(f"trivial cell round trip  : {trip * 1000:8.3f} ms median  "
                  f"(in-process exec: {local * 1e6:.2f} us; target < 2 ms)")  # fmt: skip
            queries = locomo_questions(args.data, args.queries)
            through, direct, inside = bench_search(kernel, log.path, queries)
            print(f"ms.search via kernel     : {through * 1000:8.3f} ms median  "
                  f"(in-process: {direct * 1000:.3f} ms; ratio {through / direct:.2f}x; "
                  f"target <= 1.5x; {len(queries)} queries; the call itself inside the "
                  f"sandbox: {inside * 1000:.3f} ms, {inside / direct:.2f}x)")  # fmt: skip
            bridged, logged, plain = bench_tool(kernel, log, args.calls)
            print(f"bridged tool call        : {bridged * 1000:8.3f} ms per call, logged  "
                  f"(direct call + the same 2 durable appends: {logged * 1000:.3f} ms; the "
                  f"bridge adds {(bridged - logged) * 1000:.3f} ms; target < 2 ms; "
                  f"{args.calls} calls)")  # fmt: skip
        transport = bench_transport(root / "scratch-transport", args.calls)
        print(f"bridge transport only    : {transport * 1000:8.3f} ms per call  "
              f"(no Event Log attached; direct call: {plain * 1e6:.2f} us)")  # fmt: skip
        log.close()


if __name__ == "__main__":
    main()
