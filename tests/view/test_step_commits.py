"""One commit per model step: the step's turns and its index event are durable before the call.

A child process drives a scripted session through a real Event Log as an agent does (add the
step's messages, ``ensure_budget``, ``persist``, then call the model) and, at each model call,
reports what it wrote and waits. The parent kills it with SIGKILL during such a call, right
after a step whose eviction committed the turns and the index event together, and then finds
every event of that step in the file.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from view_session import Session

from scrollctx.errors import StoreError
from scrollctx.log import EventLog
from scrollctx.view import INDEX_KIND, WorkingView

_CHILD = """
import json, sys
from scrollctx.log import EventLog
from scrollctx.view import WorkingView
from scrollctx.view._simulate import scripted_session
with EventLog.open(sys.argv[1]) as log:
    view = WorkingView(log, "s", "system", budget_tokens=3000, tail_groups=1, keep_results=1)
    for exchange in scripted_session(40, 1.0):
        written = []
        for message, calls_model in exchange:
            written += view.add(message)
            if not calls_model:
                continue
            report = view.ensure_budget(digest="x: int = 1")
            view.persist()
            turns = [{"seq": t.seq, "role": t.role, "text": t.text} for t in written]
            print(json.dumps({"turns": turns, "index_seq": report.index_seq}), flush=True)
            written = []
            sys.stdin.readline()  # the model call: the parent may kill us here
"""


def test_a_kill_during_the_model_call_finds_every_event_of_the_step(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    evicting = []
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        try:
            for _ in range(80):  # model calls; evictions come within the first few dozen
                step = json.loads(child.stdout.readline())
                if step["index_seq"] is not None and step["turns"]:
                    evicting.append(step)
                    if len(evicting) == 3:
                        break
                child.stdin.write("\n")
                child.stdin.flush()
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
    assert len(evicting) == 3, "the scripted session never evicted in a step with new turns"
    last = evicting[-1]
    with EventLog.open(path) as log:
        for turn in last["turns"]:
            event = log.get(turn["seq"])
            assert (event.role, log.full_text(event)) == (turn["role"], turn["text"])
        index = log.get(last["index_seq"])
        assert index.kind == INDEX_KIND and index.session_id == "s"
        assert max(t["seq"] for t in last["turns"]) < index.seq == log.last_seq()
        restored = WorkingView.restore(log, "s", "system", budget_tokens=3000)
        assert [t.seq for t in restored.turns][-len(last["turns"]) :] == [
            t["seq"] for t in last["turns"]
        ]


def _evicting_view(log: EventLog, budget: int = 1500) -> tuple[WorkingView, Session]:
    view = WorkingView(log, "s", "", budget_tokens=budget, tail_groups=0, keep_results=0)
    session = Session(view)
    for _ in range(3):
        session.user(5)
        session.tools([300])
        session.reply(5)
    return view, session


def test_the_pending_turns_and_the_index_event_share_one_commit(fast_dir: Path) -> None:
    with EventLog.open(fast_dir / "history.db") as log:
        view, _ = _evicting_view(log)
        statements: list[str] = []
        log._conn.set_trace_callback(statements.append)  # private: SQLite's own statement log
        report = view.ensure_budget()
        log._conn.set_trace_callback(None)
        assert report.changed and report.index_seq is not None
        assert statements.count("COMMIT") == 1
        assert log.count() == 12 + 1 and all(t.seq is not None for t in view.turns)


def test_a_failed_index_write_still_commits_the_pending_turns(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        view, _ = _evicting_view(log)
        conn = sqlite3.connect(path)
        conn.execute(
            "CREATE TRIGGER fail_index BEFORE INSERT ON conversation_history "
            f"WHEN NEW.kind = '{INDEX_KIND}' BEGIN SELECT RAISE(ABORT, 'disk refused'); END"
        )
        conn.commit()
        conn.close()
        turns, tokens = view.turns, view.tokens
        with pytest.raises(StoreError, match="disk refused"):
            view.ensure_budget()
        assert view.turns == turns and view.tokens == tokens and view.index.is_empty
        assert [t.seq for t in view.turns] == list(range(1, 13)) and log.count() == 12


def test_a_store_locked_by_another_writer_evicts_nothing(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path, lock_timeout=0.2) as log:
        view, _ = _evicting_view(log, budget=2000)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            report = view.ensure_budget()
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert report.persist_error and "locked" in report.persist_error
        assert not report.changed and all(t.seq is None for t in view.turns)
        assert log.count() == 0 and view.ensure_budget().changed
