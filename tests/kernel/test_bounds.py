"""What bridged calls may cost the host: per-session bounds, attribution, a failing Event Log.

A hostile cell could once add 122 MB to the log per cell with no bound per session; a thread an
earlier cell left running had its calls logged against a later cell; and an Event Log that
refused a write (another connection holding its lock) raised a raw ``StoreError`` out of
``run_cell`` and ended the agent run without ``run_end``. Real workers, real SQLite locks.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Session, lookup, open_session, seed

from scrollctx.kernel import Kernel, render_observation
from scrollctx.log import EventLog, Kind


@pytest.fixture
def bounded(tmp_path: Path) -> Iterator[Session]:
    session = open_session(tmp_path, session_tool_calls=30, session_log_bytes=1_000_000)
    yield session
    session.kernel.close()
    session.log.close()


def _calls(log: EventLog, after: int) -> list[int]:
    events = log.span(after + 1, log.last_seq())
    return [e.metadata["cell"] for e in events if e.kind == Kind.TOOL_CALL]


def test_the_session_bound_on_calls_holds_across_cells(bounded: Session) -> None:
    kernel, start = bounded.kernel, bounded.log.last_seq()
    cell = (
        "ok = failed = 0\nfor i in range(20):\n    try:\n        lookup('t', 1)\n"
        "        ok += 1\n    except ToolCallError as e:\n        failed += 1\n"
        "        why = str(e)\nprint(ok, failed)"
    )
    assert kernel.run_cell(cell).stdout == "20 0\n"
    second = kernel.run_cell(cell + "\nprint(why)")
    assert second.stdout.startswith("10 10\nthis session already made 30 tool calls")
    assert any("the limit of one kernel session" in note for note in second.notes)
    assert kernel.run_cell(cell).stdout == "0 20\n"
    assert _calls(bounded.log, start) == [1] * 20 + [2] * 10  # nothing logged past the bound


def test_the_session_bound_on_logged_bytes_holds_across_cells(bounded: Session) -> None:
    kernel, start = bounded.kernel, bounded.log.last_seq()
    grow = "try:\n    big_blob(200_000)\n    print('ran')\nexcept ToolCallError as e:\n    print(e)"
    outcomes = [kernel.run_cell(grow) for _ in range(8)]
    assert [o.stdout for o in outcomes[:5]] == ["ran\n"] * 5
    refused = outcomes[5]
    assert "over the 1,000,000-byte limit of one kernel session" in refused.stdout
    assert "limit of one kernel session" in render_observation(refused)
    assert all("neither run nor logged" in o.stdout for o in outcomes[5:])
    assert _calls(bounded.log, start) == [1, 2, 3, 4, 5]


def test_a_thread_left_by_an_earlier_cell_cannot_call_tools(shared: Session) -> None:
    kernel, start = shared.kernel, shared.log.last_seq()
    first = kernel.run_cell(
        "import threading\ngo = threading.Event()\nseen = []\n"
        "def later():\n    go.wait()\n    try:\n        seen.append(lookup('late', 1))\n"
        "    except ToolCallError as e:\n        seen.append(str(e))\n"
        "left = threading.Thread(target=later)\nleft.start()"
    )
    assert first.ok
    now = kernel.run_cell(
        "go.set()\nleft.join()\nown = []\n"
        "mine = threading.Thread(target=lambda: own.append(lookup('mine', 1)))\n"
        "mine.start()\nmine.join()\nprint(seen[0])\nprint(own)"
    )
    assert now.stdout.splitlines()[0].startswith("lookup() was called from a thread an earlier")
    assert now.stdout.splitlines()[1] == "[['mine fact 0']]"
    cell = kernel._cells
    assert _calls(shared.log, start) == [cell]  # only the current cell's own thread's call


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_thread_calling_between_cells_is_refused_in_the_worker(shared: Session) -> None:
    # Between cells nothing may reach the host: a frame then would be a protocol violation.
    # The next cell starts only once the thread has ended (the host sees the worker's threads).
    kernel, start = shared.kernel, shared.log.last_seq()
    pid = kernel.pid or 0
    before = _threads(pid)
    kernel.run_cell(
        "import gc, threading\noutcome = []\n"
        "w = next(o for o in gc.get_objects() if type(o).__name__ == 'Worker')\n"
        "def after_the_cell():\n"
        "    while w.cell_id is not None:\n        threading.Event().wait(0.001)\n"
        "    for call in (lambda: lookup('x'), lambda: ms.search('adoption')):\n"
        "        try:\n            call()\n        except Exception as e:\n"
        "            outcome.append(f'{type(e).__name__}: {e}')\n"
        "between = threading.Thread(target=after_the_cell)\nbetween.start()"
    )
    deadline = time.monotonic() + 30
    while _threads(pid) > before and time.monotonic() < deadline:
        time.sleep(0.01)  # polls for the thread's end, the condition the next cell needs
    result = kernel.run_cell("between.join()\nfor line in outcome:\n    print(line)")
    assert not result.namespace_lost, result.error
    outcome = result.stdout.splitlines()
    assert outcome[0].startswith("ToolCallError: lookup() was called while no cell was running")
    assert outcome[1].startswith("RuntimeError: ms.search was called while no cell was running")
    assert _calls(shared.log, start) == []


# -- an Event Log that refuses writes during a cell ------------------------------------------


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[EventLog, Kernel, sqlite3.Connection]]:
    """A kernel whose log gives up on a lock after 0.2 s, and another connection to lock it."""
    path = tmp_path / "store" / "history.db"
    log = EventLog.open(path, lock_timeout=0.2)
    seed(log)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def take_lock() -> str:
        """Hold the store's write lock from another connection."""
        holder.execute("BEGIN IMMEDIATE")
        return "locked"

    kernel = Kernel(
        event_log=log, session_id="k1", scratch=tmp_path / "scratch", tools=[take_lock, lookup]
    )
    kernel.start()
    yield log, kernel, holder
    if holder.in_transaction:
        holder.rollback()
    holder.close()
    kernel.close()
    log.close()


def test_a_write_the_log_refuses_during_a_cell_is_an_observation_then_an_event(
    locked: tuple[EventLog, Kernel, sqlite3.Connection],
) -> None:
    log, kernel, holder = locked
    start = log.last_seq()
    result = kernel.run_cell(
        "for call in (take_lock, lambda: lookup('x')):\n    try:\n        call()\n"
        "    except ToolCallError as e:\n        print(e)"
    )
    ran, refused = result.stdout.splitlines()
    assert ran.startswith("take_lock() ran, but the Event Log could not record its result")
    assert "database is locked" in ran and ran.endswith("the result is withheld")
    assert refused.startswith("lookup() was not run: the Event Log could not record the call")
    assert "[note] the Event Log refused a write during this cell" in render_observation(result)
    added = log.span(start + 1, log.last_seq())
    assert [(e.kind, e.name) for e in added] == [(Kind.TOOL_CALL, "take_lock")]
    holder.rollback()  # the other writer is done: the log works again
    after = kernel.run_cell("print(lookup('y', 1))")
    assert after.stdout == "['y fact 0']\n" and not after.notes
    recorded = [e for e in log.span(start + 2, log.last_seq()) if e.kind == Kind.SYSTEM]
    assert len(recorded) == 1 and len(recorded[0].metadata["store_errors"]) == 2
    assert "database is locked" in recorded[0].content


def test_a_worker_start_the_log_refuses_is_recorded_once_it_works_again(tmp_path: Path) -> None:
    # The start event of a kernel whose log is locked is kept, not raised: the kernel starts,
    # cells run, and the refused write is recorded by the first cell after the lock is gone.
    path = tmp_path / "store" / "history.db"
    log = EventLog.open(path, lock_timeout=0.2)
    seed(log)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    start = log.last_seq()
    try:
        with Kernel(event_log=log, session_id="k1", scratch=tmp_path / "scratch") as kernel:
            assert kernel.start().holds
            assert kernel.run_cell("print(6 * 7)").stdout == "42\n"
            holder.rollback()
            assert kernel.run_cell("pass").ok
        added = log.span(start + 1, log.last_seq())
        recorded = [e for e in added if "store_errors" in e.metadata]
        assert len(recorded) == 1 and recorded[0].metadata["store_errors"][0].startswith(
            "sandbox: "
        )
        assert "database is locked" in recorded[0].content
        assert not any(e.metadata.get("kernel") == "started" for e in added)  # never written
    finally:
        holder.close()
        log.close()


def test_the_session_bound_on_logged_bytes_refuses_from_exactly_the_limit(tmp_path: Path) -> None:
    # A first kernel learns what one call logs (its refusal says); then a bound of exactly that
    # refuses the second call, and one byte more lets it through.
    cell = (
        "for _ in range(2):\n    try:\n        lookup('t', 1)\n        print('ran')\n"
        "    except ToolCallError as e:\n        print(e)"
    )

    def second_call(limit: int) -> str:
        with Kernel(scratch=tmp_path / "scratch", tools=[lookup], session_log_bytes=limit) as k:
            return k.run_cell(cell).stdout.splitlines()[1]

    refused = second_call(1)
    one_call = int(refused.split("tool calls that logged ")[1].split(" bytes")[0].replace(",", ""))
    assert one_call > 1
    assert f"logged {one_call:,} bytes, over the {one_call:,}-byte limit" in second_call(one_call)
    assert second_call(one_call + 1) == "ran"


def test_the_session_bound_counts_the_bytes_the_store_holds_not_characters(
    tmp_path: Path,
) -> None:
    # A result of 4-byte characters was counted once per character: a session bounded at
    # 20 MiB logged 84 MB. The arguments are counted as the log holds them too.
    def smiles(n: int) -> str:
        """``n`` smiling faces."""
        return "\U0001f600" * n

    cell = "smiles(900)\ntry:\n    smiles(1)\nexcept ToolCallError as e:\n    print(e)"
    with EventLog.open(tmp_path / "store" / "history.db") as log:
        with Kernel(event_log=log, session_id="s", scratch=tmp_path / "scratch", tools=[smiles],
                    session_log_bytes=1) as kernel:  # fmt: skip
            refusal = kernel.run_cell(cell).stdout
        calls = (Kind.TOOL_CALL, Kind.TOOL_RESULT)
        call, result = [e for e in log.session_events("s") if e.kind in calls]
        stored = sqlite3.connect(log.path).execute(
            "SELECT SUM(LENGTH(CAST(tool_input AS BLOB))) + SUM(LENGTH(CAST(content AS BLOB))) "
            "FROM conversation_history WHERE seq IN (?, ?)", (call.seq, result.seq)
        ).fetchone()[0]  # fmt: skip
    counted = int(refusal.split("tool calls that logged ")[1].split(" bytes")[0].replace(",", ""))
    assert counted == stored and counted > 4 * 900, (counted, stored)


def test_stderr_is_cut_at_8000_characters_by_default(shared: Session) -> None:
    # docs/kernel.md: "stderr is capped at 8,000 the same way" (as stdout at 32,000).
    result = shared.kernel.run_cell("import sys\nsys.stderr.write('e' * 9_000)")
    assert (result.stderr, result.stderr_hidden) == ("e" * 8_000, 1_000)
    result = shared.kernel.run_cell("print('o' * 40_000, end='')")
    assert (result.stdout, result.stdout_hidden) == ("o" * 32_000, 8_000)
