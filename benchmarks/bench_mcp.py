"""MCP latencies against baselines measured in the same run.

Run: ``.venv/bin/python benchmarks/bench_mcp.py [--rounds 7] [--calls 30] [--data DIR]``

1. ``scroll_search`` round trip: the official SDK client calls ``scroll_search(query, k=10)`` on a
   real ``scroll mcp`` subprocess over stdio; baseline: the same ``ms.search(query, k=10)`` on an
   in-process surface over the same store (all of LoCoMo, built in a temp folder; queries are
   LoCoMo questions). Reported: the added milliseconds at the median (target <= 3 ms).
2. ``scroll_python`` trivial cell (``pass``) round trip through the same server; baseline: the
   same cell through ``Kernel.run_cell`` in-process (the same sandbox).
3. A bridged MCP tool call: a cell calls ``clock.get_current_time(timezone='UTC')`` (the real
   ``mcp-server-time``), host to server through the agent's hub, logged as two events, timed
   inside the cell; baseline: the SDK client calling another ``mcp-server-time`` directly.

Each measure runs in ``--rounds`` alternating rounds of ``--calls`` calls (the MCP side, then
its baseline), so load changes hit both alike; it prints the median of the per-call medians of
the rounds, with min-max over rounds. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

import anyio
from bench_kernel import locomo_questions, spread
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from scrollctx.agent import McpServerSpec
from scrollctx.agent._mcp import McpHub
from scrollctx.ingest import ingest_path
from scrollctx.kernel import Kernel
from scrollctx.log import EventLog
from scrollctx.surface import open_surface

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BIN = Path(sys.executable).parent
TIME_SERVER = (str(BIN / "mcp-server-time"), "--local-timezone", "UTC")


async def timed_async(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def report(name: str, ours: list[float], base: list[float], target: str) -> None:
    """One line: our median, the baseline's, the difference and the ratio."""
    mine, theirs = statistics.median(ours), statistics.median(base)
    print(f"{name:<26}: {spread(ours)}  baseline {spread(base)}  adds "
          f"{(mine - theirs) * 1000:.2f} ms ({mine / theirs:.1f}x); {target}")  # fmt: skip


async def bench_server(
    store: Path, queries: list[str], rounds: int, calls: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per-round medians: scroll_search vs ms.search, scroll_python vs Kernel.run_cell."""
    params = StdioServerParameters(command=str(BIN / "scroll"),
                                   args=["mcp", "--store", str(store), "--read-only"])  # fmt: skip
    search, direct, cells, local = [], [], [], []
    with open(store.parent / "server.stderr", "w") as err, open_surface(store / "history.db") as ms:
        async with Client(stdio_client(params, errlog=err)) as client:
            await client.call_tool("scroll_python", {"source": "pass"})  # the kernel starts
            with Kernel(store / "history.db", session_id="bench") as kernel:
                kernel.run_cell("pass")
                for _ in range(rounds):
                    picked = queries[:calls]
                    search.append(statistics.median([await timed_async(
                        lambda q=q: client.call_tool("scroll_search", {"query": q, "k": 10}))
                        for q in picked]))  # fmt: skip
                    direct.append(statistics.median(
                        [timed(lambda q=q: ms.search(q, 10)) for q in picked]))  # fmt: skip
                    cells.append(statistics.median([await timed_async(
                        lambda: client.call_tool("scroll_python", {"source": "pass"}))
                        for _ in range(calls)]))  # fmt: skip
                    local.append(statistics.median(
                        [timed(lambda: kernel.run_cell("pass")) for _ in range(calls)]
                    ))  # fmt: skip
    return search, direct, cells, local


CELL = """import time as t
times = []
for _ in range({calls}):
    started = t.perf_counter()
    clock.get_current_time(timezone='UTC')
    times.append(t.perf_counter() - started)
print(sorted(times)[len(times) // 2])
"""


async def bench_direct(
    rounds: int, calls: int, bridged: Sequence[Callable[[], float]]
) -> tuple[list[list[float]], list[float]]:
    """Per-round medians of bridged calls (one list per cell runner) and of direct SDK calls."""
    params = StdioServerParameters(command=TIME_SERVER[0], args=list(TIME_SERVER[1:]))
    through: list[list[float]] = [[] for _ in bridged]
    direct: list[float] = []
    with open(Path(tempfile.gettempdir()) / "bench-mcp-time.stderr", "w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            arguments = {"timezone": "UTC"}
            await client.call_tool("get_current_time", arguments)
            for _ in range(rounds):
                for runner, times in zip(bridged, through, strict=True):
                    times.append(await anyio.to_thread.run_sync(runner))
                direct.append(statistics.median([await timed_async(
                    lambda: client.call_tool("get_current_time", arguments))
                    for _ in range(calls)]))  # fmt: skip
    return through, direct


def cell_runner(kernel: Kernel, calls: int) -> Callable[[], float]:
    """Run the timing cell once; return the median call time it measured inside the sandbox."""

    def run() -> float:
        out = kernel.run_cell(CELL.format(calls=calls))
        if out.error:
            raise SystemExit(out.error)
        return float(json.loads(out.stdout))

    run()  # warm
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        store = Path(tmp) / "store"
        with EventLog.open(store / "history.db") as log:
            ingest_path(log, args.data / "locomo" / "locomo10.json")
            print(f"store: LoCoMo, {log.count():,} events; {args.rounds} alternating rounds of "
                  f"{args.calls} calls each")  # fmt: skip
        queries = locomo_questions(args.data, args.calls)
        search, direct, cells, local = anyio.run(
            bench_server, store, queries, args.rounds, args.calls
        )
        report("scroll_search (stdio)", search, direct, "baseline: ms.search in-process; "
               "target <= 3 ms added at the median")  # fmt: skip
        report("scroll_python 'pass'", cells, local, "baseline: Kernel.run_cell in-process")
        with ExitStack() as stack:
            hub = stack.enter_context(McpHub([McpServerSpec("clock", command=TIME_SERVER)]))
            log = stack.enter_context(EventLog.open(store / "history.db"))
            tools = hub.kernel_functions()
            logged = stack.enter_context(Kernel(event_log=log, session_id="bench-mcp",
                                                tools=tools, timeout=600))  # fmt: skip
            unlogged = stack.enter_context(Kernel(tools=tools, timeout=600))
            runners = [cell_runner(logged, args.calls), cell_runner(unlogged, args.calls)]
            (through, plain), baseline = anyio.run(bench_direct, args.rounds, args.calls, runners)
        report("bridged MCP tool call", through, baseline, "baseline: the SDK client calling "
               "mcp-server-time directly; each bridged call is logged as two durable "
               "events")  # fmt: skip
        report("  the same, not logged", plain, baseline, "(a kernel without an Event Log)")


if __name__ == "__main__":
    main()
