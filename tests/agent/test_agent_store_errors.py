"""An Event Log that refuses writes mid-run (another connection holds its lock): the run ends.

Once, a bridged call's append failing with "database is locked" raised a raw ``StoreError``
out of ``Agent.iter_run``: no observation, no ``run_end``, no trace. The lock here is real (a
second SQLite connection in ``BEGIN IMMEDIATE``); the log gives up on it after 0.2 s.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import (
    AgentEvent,
    AgentLoop,
    Backend,
    RunFinished,
    ScrollPolicy,
    ToolStep,
    tool,
)
from scrollctx.agent._tools import ToolContext, scroll_toolset
from scrollctx.errors import StoreError
from scrollctx.log import EventLog, NewEvent


class LockLiftsOnARefusal(EventLog):
    """The real Event Log, plus a test hook: when it refuses a write, the lock holder lets go.

    That makes "another writer held the lock for a while" deterministic: exactly the first
    refused write fails, and the log works again for everything after it.
    """

    holder: sqlite3.Connection | None = None

    def append_many(self, events: Iterable[NewEvent]) -> list[int]:
        try:
            return super().append_many(events)
        except StoreError:
            if self.holder is not None and self.holder.in_transaction:
                self.holder.rollback()
            raise


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    EventLog.open(tmp_path / "store" / "history.db").close()
    connection = sqlite3.connect(
        tmp_path / "store" / "history.db", isolation_level=None, check_same_thread=False
    )
    yield connection
    if connection.in_transaction:
        connection.rollback()
    connection.close()


def _run(
    log: EventLog, holder: sqlite3.Connection, backend: Backend, traces: Path, task: str
) -> list[AgentEvent]:
    """Every event of a run of ``task`` with a tool that takes the lock (kernel closed after)."""

    def take_lock() -> str:
        """Hold the store's write lock from another connection."""
        holder.execute("BEGIN IMMEDIATE")
        return "locked"

    toolset = scroll_toolset([tool(take_lock)])
    context = ToolContext(log, session_id="s1", kernel_functions=toolset.kernel_functions)
    policy = ScrollPolicy.open(log, "s1", "system", budget_tokens=8000)
    loop = AgentLoop(
        backend=backend, policy=policy, toolset=toolset, context=context, trace_dir=traces
    )
    try:
        return list(loop.iter_run(task))
    finally:
        loop.context.close()


def test_a_refused_write_in_a_cell_is_an_observation_and_the_run_ends_with_run_end(
    tmp_path: Path,
    holder: sqlite3.Connection,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
) -> None:
    log = LockLiftsOnARefusal.open(tmp_path / "store" / "history.db", lock_timeout=0.2)
    log.holder = holder
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "take_lock()"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])
    events = _run(log, holder, scripted_backend, tmp_path / "traces", "Lock the store.")
    seen = next(e for e in events if isinstance(e, ToolStep)).observation
    assert "ToolCallError: take_lock() ran, but the Event Log could not record its result" in seen
    assert "[note] the Event Log refused a write during this cell" in seen
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.answer == "ok" and finished.seq > 0
    assert finished.trace_path is not None and finished.trace_path.is_file()
    recorded = [e for e in log.session_events("s1") if e.metadata.get("store_errors")]
    assert len(recorded) == 1 and "database is locked" in recorded[0].content
    log.close()


def test_a_log_that_stays_locked_still_ends_the_run_with_a_trace(
    tmp_path: Path,
    holder: sqlite3.Connection,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
) -> None:
    log = EventLog.open(tmp_path / "store" / "history.db", lock_timeout=0.2)
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "take_lock()"})])
    events = _run(log, holder, scripted_backend, tmp_path / "traces", "Lock the store for good.")
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.status == "failed"
    assert finished.failure is not None and "database is locked" in finished.failure
    assert finished.seq == 0  # the run_end record was refused too; the trace has it
    assert finished.trace_path is not None
    trace = json.loads(finished.trace_path.read_text(encoding="utf-8"))
    assert trace["status"] == "failed" and "database is locked" in trace["failure"]
    log.close()
