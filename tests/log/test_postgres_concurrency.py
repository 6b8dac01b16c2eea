"""Monotonic visibility on a real server: a reader that has seen seq N never finds a row below N.

Writers are separate processes (``pg_writer.py``); the tailing reader follows the log by
``seq > last`` exactly as the replica, ``scroll watch`` and the proxy do.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import turn

from needs import import_or_missing
from postgres_server import PostgresServer

psycopg = import_or_missing("psycopg")
from scrollctx.log._postgres import PostgresEventStore  # noqa: E402

WRITER = Path(__file__).with_name("pg_writer.py")


def _store(url: str, folder: Path) -> PostgresEventStore:
    return PostgresEventStore.open(url, replica_path=folder / "history.db")


@pytest.fixture
def reader(postgres_url: str, tmp_path: Path) -> Iterator[PostgresEventStore]:
    store = _store(postgres_url, tmp_path / "reader")
    yield store
    store.close()


def test_a_tailing_reader_misses_nothing_while_many_processes_write(
    postgres_url: str, reader: PostgresEventStore, tmp_path: Path
) -> None:
    writers = [
        subprocess.Popen(
            [sys.executable, str(WRITER), postgres_url, name, "30", "20", str(tmp_path / name)],
            stdout=subprocess.DEVNULL,
        )
        for name in (f"w{n}" for n in range(6))
    ]
    seen: list[int] = []
    last = 0
    while any(w.poll() is None for w in writers):
        for event in reader.events_after(last, 500):
            seen.append(event.seq)
            last = event.seq
    assert [w.wait() for w in writers] == [0] * 6
    seen += [event.seq for event in reader.events_after(last, 10_000)]
    with psycopg.connect(postgres_url) as raw:
        table = [row[0] for row in raw.execute("SELECT seq FROM conversation_history ORDER BY seq")]
    assert len(table) == 6 * 30 * 20
    assert seen == table  # every row, once, in seq order: none appeared below the reader's mark
    assert table == list(range(1, len(table) + 1))


def test_a_writer_cannot_commit_a_seq_while_a_lower_one_is_pending(
    postgres_server: PostgresServer, postgres_url: str, reader: PostgresEventStore, tmp_path: Path
) -> None:
    first, second = _store(postgres_url, tmp_path / "a"), _store(postgres_url, tmp_path / "b")
    release, holding = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with first.atomic():
            first.append(turn("numbered first, committed late"))
            holding.set()
            release.wait(30)

    slow = threading.Thread(target=slow_writer)
    slow.start()
    holding.wait(30)
    fast = threading.Thread(target=lambda: second.append(turn("numbered second")))
    fast.start()
    database = postgres_url.rsplit("/", 1)[1]
    with postgres_server.admin(database) as admin:
        waiting = 0
        while not waiting:  # the second writer is queued on the head lock, in the server
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            waiting = row[0] if row else 0
    assert reader.events_after(0, 10) == []  # nothing may be visible: seq 1 is not committed
    release.set()
    slow.join(30)
    fast.join(30)
    events = reader.events_after(0, 10)
    assert [(e.seq, e.content) for e in events] == [
        (1, "numbered first, committed late"),
        (2, "numbered second"),
    ]
    first.close()
    second.close()
