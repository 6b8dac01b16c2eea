"""Kernel latencies against baselines measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_kernel.py [--starts 15] [--cells 300] [--queries 60]
[--repeats 5] [--calls 500] [--data DIR] [--only-start]``

1. Worker start with every sandbox layer and a store bound (``Kernel(...).start()``: bwrap and
   its namespaces, spawn, imports, rlimits, netns, Landlock, seccomp, self-tests, the scratch
   tmpfs opened and seeded, the ready frame; the memory reader starts on the first ``ms`` call,
   not here), median (min-max) of ``--starts`` rounds that alternate it with the same start with
   no store bound, a start without the namespaces layer, and a bare ``python -I -c pass`` (the
   baselines). Also timed: the first ``ms`` call of each bound kernel (a cell ``ms.has_fts5``:
   the memory reader, confined the same way, boots and opens the store), against the second
   (the same cell, reader running). ``--only-start`` stops there.
2. Trivial cell round trip (``run_cell("pass")``, digest included), median of ``--cells``;
   baseline: ``exec`` of the same code in-process.
3. ``ms.search(q, k=10)`` through the kernel (one cell per query, timed by the host: worker ->
   host -> memory reader -> host -> worker) against the same call on an in-process surface over
   the same store, alternating query by query; queries are the first ``--queries`` LoCoMo
   questions, over a store holding all of LoCoMo (built in a temp folder). ``--repeats`` rounds;
   min/median/max over the rounds of each round's median and of its ratio. The call is also
   timed inside the cell (the round trip through the reader without the cell's own), with its
   ratio to the in-process call, round by round. The host reads each cell's literal search
   off its text and the memory reader runs it while the worker starts the cell (answered
   ahead: ``kernel/_ahead.py``); the counts say how many were run, used and cut short. The
   same rounds again with the query passed by name (``ms.search(queries[i], k=10)``), which
   nothing can read ahead: the kernel's cost without it. And the
   CPU time the searches cost, which scheduling delays on a loaded machine do not inflate:
   per search, the worker's, the reader's and the host's main threads (``/proc/<pid>/schedstat``,
   ``time.thread_time``) against the in-process call's (``time.thread_time``). Then rounds
   that alternate in blocks: the in-process loop over the queries, all of them in one cell (the
   hop without a cell per call: wall and CPU time per call), then one cell per query (the host
   thread has not just run an in-process search before each cell, as it has above).
4. A bridged tool call (a cell calls a no-op host tool, timed inside the cell; each call is
   logged as two durable events) against a direct in-process call of the same function logged
   with the same two appends, in alternating rounds of 25 (``--calls`` in all); and the bridge
   alone (no Event Log attached).
5. The reader's budgets: a query that would run forever, against the 5 s time budget (seconds
   until it returns partial), and ``SELECT randomblob(400000000)`` (seconds until the error,
   and how much the host's peak memory grew).

Prints the figures, ratios and the issue's targets. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
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


def spread(values: list[float]) -> tuple[float, float, float]:
    """min, median, max."""
    return min(values), statistics.median(values), max(values)


def bench_start(log: EventLog, scratch: Path, starts: int) -> dict[str, list[float]]:
    """Start times of a worker with every layer and a store bound, with no store bound, without
    the namespaces layer, and of a bare interpreter, in alternating rounds (so load changes hit
    all four alike); and the first and second ``ms`` calls of each bound kernel."""
    without = SandboxPolicy("best-effort", unavailable=frozenset({"namespaces"}))
    times: dict[str, list[float]] = {name: [] for name in (
        "all", "first ms", "second ms", "no store", "without namespaces", "bare")}  # fmt: skip

    def start_and_stop(policy: SandboxPolicy, bound: bool = True) -> float:
        kernel = Kernel(event_log=log if bound else None, session_id="bench", scratch=scratch,
                        sandbox=policy)  # fmt: skip
        elapsed = timed(kernel.start)
        status = kernel.status
        if status is None or any(s.name not in policy.unavailable and not s.holds
                                 for s in status.layers):  # fmt: skip
            raise SystemExit(f"sandbox does not hold here: {status}")
        if bound:
            for name in ("first ms", "second ms"):
                times[name].append(kernel.run_cell("ms.has_fts5").duration)
            if kernel.ms_state != "bound":
                raise SystemExit(f"the memory reader did not open the store: {kernel.ms_state}")
        kernel.close()
        return elapsed

    def bare() -> float:
        return timed(lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True))

    start_and_stop(SandboxPolicy())  # the first start asks bwrap and the interpreter once
    times["first ms"].clear()
    times["second ms"].clear()
    for _ in range(starts):
        times["all"].append(start_and_stop(SandboxPolicy()))
        times["no store"].append(start_and_stop(SandboxPolicy(), bound=False))
        times["without namespaces"].append(start_and_stop(without, bound=False))
        times["bare"].append(bare())
    return times


def bench_cells(kernel: Kernel, cells: int) -> tuple[float, float]:
    namespace: dict[str, object] = {}
    code = compile("pass", "<bench>", "exec")
    kernel.run_cell("pass")
    trips = [timed(lambda: kernel.run_cell("pass")) for _ in range(cells)]
    local = [timed(lambda: exec(code, namespace)) for _ in range(cells)]  # noqa: S102
    return statistics.median(trips), statistics.median(local)


def cpu_seconds(pid: int) -> float:
    """Seconds on a CPU of a process's main thread (from the scheduler, in nanoseconds)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def bench_search(
    kernel: Kernel, db: Path, queries: list[str], repeats: int, *, named: bool = False
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per round: the median of the cell as the host times it, of the same call in-process,
    and of the call timed inside the worker; and the ratio of the CPU time per search of the
    kernel's three processes to that of the in-process call.

    ``named``: the cell passes the query by name (``ms.search(queries[7], k=10)``), so the
    host cannot read the call off its text and nothing is answered ahead."""
    ms = open_surface(db)
    through, local, inside, cpu = [], [], [], []
    kernel.run_cell(f"import time\nqueries = {queries!r}\nms.has_fts5")  # starts the reader
    worker, reader = kernel.pid, kernel.reader.pid if kernel.reader else None
    if worker is None or reader is None:
        raise SystemExit("the kernel has no worker or no memory reader")
    for _ in range(repeats):
        round_through, round_local, round_inside = [], [], []
        host_cpu = local_cpu = 0.0
        others = cpu_seconds(worker) + cpu_seconds(reader)
        for index, query in enumerate(queries):
            argument = f"queries[{index}]" if named else repr(query)
            cell = (
                f"t = time.perf_counter()\nrows = ms.search({argument}, k=10)\n"
                "print(time.perf_counter() - t)"
            )
            started = time.thread_time()
            round_local.append(timed(lambda q=query: ms.search(q, k=10)))  # type: ignore[misc]
            local_cpu += time.thread_time() - started
            result = kernel.run_cell(cell)
            host_cpu += time.thread_time() - started
            if not result.ok:
                raise SystemExit(f"search cell failed: {result.error}")
            round_through.append(result.duration)
            round_inside.append(float(result.stdout))
        others = cpu_seconds(worker) + cpu_seconds(reader) - others
        through.append(statistics.median(round_through))
        local.append(statistics.median(round_local))
        inside.append(statistics.median(round_inside))
        cpu.append((host_cpu - local_cpu + others) / local_cpu)
    ms.close()
    return through, local, inside, cpu


def bench_search_blocks(
    kernel: Kernel, db: Path, queries: list[str], repeats: int
) -> tuple[list[float], list[float], list[float]]:
    """Rounds that alternate in blocks, not query by query: the in-process loop over the
    queries, then every query in one cell (the hop without a cell per call), then one cell per
    query again. Per round: the wall time per call inside the one cell and its CPU time (the
    kernel's three processes) against the in-process loop's, and the median cell of the block
    against the median in-process call."""
    ms = open_surface(db)
    kernel.run_cell(f"import time\nqueries = {queries!r}")
    worker, reader = kernel.pid, kernel.reader.pid if kernel.reader else None
    if worker is None or reader is None:
        raise SystemExit("the kernel has no worker or no memory reader")
    loop = (
        "t = time.perf_counter()\nfor q in queries:\n    ms.search(q, k=10)\n"
        "print(time.perf_counter() - t)"
    )
    wall, cpu, cells = [], [], []
    for _ in range(repeats):
        started, calls = time.thread_time(), [timed(lambda q=q: ms.search(q, k=10))  # type: ignore[misc]
                                              for q in queries]  # fmt: skip
        local_cpu = time.thread_time() - started
        others, started = cpu_seconds(worker) + cpu_seconds(reader), time.thread_time()
        result = kernel.run_cell(loop)
        host_cpu = time.thread_time() - started
        others = cpu_seconds(worker) + cpu_seconds(reader) - others
        if not result.ok:
            raise SystemExit(f"search loop cell failed: {result.error}")
        wall.append(float(result.stdout) / sum(calls))
        cpu.append((host_cpu + others) / local_cpu)
        block = [kernel.run_cell(f"rows = ms.search({q!r}, k=10)").duration for q in queries]
        cells.append(statistics.median(block) / statistics.median(calls))
    ms.close()
    return wall, cpu, cells


def bench_budgets(kernel: Kernel) -> tuple[float, float, int]:
    """Seconds for a never-ending query under the 5 s budget; seconds and host peak growth
    for the 400 MB randomblob."""
    forever = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    )
    cut = kernel.run_cell(f"rows = ms.sql_query({forever!r})\nprint(rows.partial)")
    if cut.stdout != "True\n":
        raise SystemExit(f"the time budget did not cut the query: {cut.stdout} {cut.error}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    bomb = kernel.run_cell("ms.sql_query('SELECT randomblob(400000000) AS b')")
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) * 1024
    if bomb.error is None or "too big" not in bomb.error:
        raise SystemExit(f"the blob was not refused: {bomb.error}")
    return cut.duration, bomb.duration, grown


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


def _over(values: list[float], baselines: list[float]) -> list[float]:
    """Round by round, each value over its round's baseline."""
    return [value / base for value, base in zip(values, baselines, strict=True)]


def _ratio(values: list[float]) -> str:
    low, mid, high = spread(values)
    return f"{mid:.2f}x (min {low:.2f}x, max {high:.2f}x)"


def _ms(values: list[float]) -> str:
    low, mid, high = spread(values)
    return f"{mid * 1000:.1f} ms (min {low * 1000:.1f}, max {high * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
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
        print(f"worker start, all layers : {_ms(times['all'])} with a store bound (no store "
              f"bound: {_ms(times['no store'])}; without the namespaces layer: "
              f"{_ms(times['without namespaces'])}; bare python -I: {_ms(times['bare'])}; ratio "
              f"to bare {start / bare:.2f}x; target < 150 ms; {args.starts} alternating "
              "rounds)")  # fmt: skip
        print(f"first ms call            : {_ms(times['first ms'])} (a cell ms.has_fts5 that "
              f"starts the memory reader; the second call: {_ms(times['second ms'])})")  # fmt: skip
        if args.only_start:
            return
        kernel = Kernel(event_log=log, session_id="bench", scratch=root / "scratch",
                        tools=[noop])  # fmt: skip
        with kernel:
            trip, local = bench_cells(kernel, args.cells)
            print(f"trivial cell round trip  : {trip * 1000:8.3f} ms median  "
                  f"(in-process exec: {local * 1e6:.2f} us; target < 2 ms)")  # fmt: skip
            queries = locomo_questions(args.data, args.queries)
            through, direct, inside, cpu = bench_search(kernel, log.path, queries, args.repeats)
            low, mid, high = spread(_over(through, direct))
            print(f"ms.search via kernel     : ratio {mid:.2f}x median (min {low:.2f}x, max "
                  f"{high:.2f}x) of {args.repeats} rounds of {len(queries)} queries; target "
                  f"<= 1.5x; through the kernel {_ms(through)}; in-process {_ms(direct)}; "
                  f"the call timed inside the worker {_ms(inside)}, ratio "
                  f"{_ratio(_over(inside, direct))} "
                  "(the cell's own round trip left out)")  # fmt: skip
            low, mid, high = spread(cpu)
            print(f"ms.search CPU time       : ratio {mid:.2f}x median (min {low:.2f}x, max "
                  f"{high:.2f}x): worker + memory reader + host per search, against the "
                  "in-process call (scheduling delays excluded)")  # fmt: skip
            assert kernel.reader is not None  # bench_search ran through it
            read_ahead = kernel.reader.ahead_counts
            print(f"answered ahead           : {read_ahead} (each cell's search read off its "
                  "text and run while the worker starts the cell)")  # fmt: skip
            through, direct, inside, _ = bench_search(kernel, log.path, queries, args.repeats,
                                                      named=True)  # fmt: skip
            during = [n - b for n, b in zip(kernel.reader.ahead_counts, read_ahead, strict=True)]
            print(f"ms.search, query by name : ratio {_ratio(_over(through, direct))} (rows = "
                  "ms.search(queries[i], k=10): nothing to read ahead; run, used, cut during "
                  f"these rounds: {during}); through the kernel {_ms(through)}; in-process "
                  f"{_ms(direct)}; the call inside the worker "
                  f"{_ratio(_over(inside, direct))}")  # fmt: skip
            wall, cpu, cells = bench_search_blocks(kernel, log.path, queries, args.repeats)
            print(f"ms.search, in blocks     : {len(queries)} calls in one cell: wall time "
                  f"{_ratio(wall)}, CPU time {_ratio(cpu)} of the in-process loop's (the hop "
                  f"without a cell per call); one cell per call: {_ratio(cells)} (rounds "
                  "alternate in blocks, not query by query)")  # fmt: skip
            bridged, logged, plain = bench_tool(kernel, log, args.calls)
            print(f"bridged tool call        : {bridged * 1000:8.3f} ms per call, logged  "
                  f"(direct call + the same 2 durable appends: {logged * 1000:.3f} ms; the "
                  f"bridge adds {(bridged - logged) * 1000:.3f} ms; target < 2 ms; "
                  f"{args.calls} calls)")  # fmt: skip
            forever, bomb, grown = bench_budgets(kernel)
            print(f"reader budgets           : a never-ending query returned partial after "
                  f"{forever:.2f} s (budget 5 s); randomblob(400000000) refused after "
                  f"{bomb:.3f} s, host peak memory +{grown / 1024**2:.1f} MiB")  # fmt: skip
        transport = bench_transport(root / "scratch-transport", args.calls)
        print(f"bridge transport only    : {transport * 1000:8.3f} ms per call  "
              f"(no Event Log attached; direct call: {plain * 1e6:.2f} us)")  # fmt: skip
        log.close()


if __name__ == "__main__":
    main()
