"""Another process holding the store's lock: the Event Log waits ``lock_timeout``, then says so.

The holder is a real second process with its own SQLite connection. The test goes on only once
the store shows the lock held (a probe connection is refused at once), and the holder lets go
only after the waiting call has given up, so no sleep decides who is first. A wait is checked
from below only: a loaded machine can make it longer, never shorter.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from store_helpers import turn

from scrollctx.errors import StoreError
from scrollctx.log import EventLog

# Takes the lock, says so, holds it until told (a line on stdin), then lets go.
_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def write_lock_held_by_another_process(path: Path) -> Iterator[None]:
    """Hold ``path``'s write lock in a second process for the duration of the block."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as holder:  # fmt: skip
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline() == "held\n"
            assert _is_write_locked(path)
            yield
        finally:
            holder.stdin.write("\n")
            holder.stdin.close()
            assert holder.wait(timeout=60) == 0
    assert not _is_write_locked(path)


def _is_write_locked(path: Path) -> bool:
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc)
    else:
        probe.execute("ROLLBACK")
        return False
    finally:
        probe.close()


def test_an_append_waits_lock_timeout_for_another_writer_then_fails_clearly(
    store_dir: Path,
) -> None:
    path = store_dir / "history.db"
    with EventLog.open(path, lock_timeout=0.5) as log:
        log.append(turn("before"))
        with write_lock_held_by_another_process(path):
            started = time.monotonic()
            with pytest.raises(StoreError, match="append on .* failed: database is locked"):
                log.append(turn("while locked"))
            waited = time.monotonic() - started
        assert waited >= 0.5  # SQLite's busy handler, given the timeout in milliseconds
        log.append(turn("after"))  # the same log writes again once the lock is free
        assert [e.content for e in log.span(1, 10)] == ["before", "after"]


def test_opening_a_new_store_retries_the_wal_switch_until_lock_timeout(store_dir: Path) -> None:
    # A new file still in rollback-journal mode whose write lock another process holds: the
    # switch to WAL is refused at once each time (no busy handler), so the log retries it.
    path = store_dir / "history.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    conn.close()
    with write_lock_held_by_another_process(path):
        started = time.monotonic()
        with pytest.raises(StoreError, match="held its lock for over 0.5 s; retry later"):
            EventLog.open(path, lock_timeout=0.5)
        waited = time.monotonic() - started
    # The retries back off up to 0.1 s, and none is begun that would end past the deadline.
    assert waited >= 0.5 - 0.1
    with EventLog.open(path) as log:
        assert log.append(turn("first")) == 1
