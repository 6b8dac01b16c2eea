"""Nothing acknowledged is lost and nothing is doubled: a writer killed mid-batch, a server
restarted during appends, a server that stays down.

All on the real test server; these tests stop and start it, so it is back up when they end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from store_helpers import turn

from needs import import_or_missing
from postgres_server import PostgresServer
from scrollctx.errors import StoreUnavailable

psycopg = import_or_missing("psycopg")
from pg_writer import main as write_batches  # noqa: E402

from scrollctx.log._postgres import PostgresEventStore  # noqa: E402

WRITER = Path(__file__).with_name("pg_writer.py")
BATCHES, SIZE = 8, 1500


def _batch_counts(url: str) -> dict[int, int]:
    with psycopg.connect(url) as raw:
        rows = raw.execute(
            "SELECT split_part(dedup_key, ':', 2)::int, count(*) FROM conversation_history "
            "GROUP BY 1"
        ).fetchall()
    return {int(batch): int(n) for batch, n in rows}


def _seqs(url: str) -> list[int]:
    with psycopg.connect(url) as raw:
        return [row[0] for row in raw.execute("SELECT seq FROM conversation_history ORDER BY seq")]


def test_a_writer_killed_mid_batch_loses_only_unacknowledged_batches_whole(
    postgres_url: str, tmp_path: Path
) -> None:
    args = [sys.executable, str(WRITER), postgres_url, "w", str(BATCHES), str(SIZE), str(tmp_path)]
    writer = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked = [writer.stdout.readline().split()[1] for _ in range(2)]  # two batches committed
    os.kill(writer.pid, signal.SIGKILL)  # the third batch is on its way
    writer.wait()
    writer.stdout.close()
    counts = _batch_counts(postgres_url)
    assert all(counts.get(int(batch)) == SIZE for batch in acked)
    assert set(counts.values()) <= {SIZE}  # no batch half-written
    rerun = subprocess.run(args, capture_output=True, text=True, check=True)
    assert rerun.stdout.count("ack") == BATCHES
    assert _batch_counts(postgres_url) == dict.fromkeys(range(BATCHES), SIZE)
    assert _seqs(postgres_url) == list(range(1, BATCHES * SIZE + 1))  # no seq burned or doubled


def test_a_server_restarted_during_appends_loses_and_doubles_nothing(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    acks: list[str] = []
    failures: list[BaseException] = []
    two_acked = threading.Event()

    class Acks:
        def write(self, text: str) -> None:
            acks.extend(text.split()[1:2])
            if len(acks) >= 2:
                two_acked.set()

        def flush(self) -> None:
            pass

    def writer() -> None:
        previous, sys.stdout = sys.stdout, Acks()  # type: ignore[assignment]
        try:
            write_batches(postgres_url, "w", BATCHES, SIZE, str(tmp_path))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)
        finally:
            sys.stdout = previous
            two_acked.set()

    thread = threading.Thread(target=writer)
    thread.start()
    two_acked.wait(60)
    postgres_server.stop("fast")  # open transactions are aborted, connections cut
    acked_while_down = len(acks)
    postgres_server.start()
    thread.join(120)
    assert acked_while_down < BATCHES  # the writer was mid-run when the server went away
    assert failures == []
    assert len(acks) == BATCHES
    assert _batch_counts(postgres_url) == dict.fromkeys(range(BATCHES), SIZE)
    assert _seqs(postgres_url) == list(range(1, BATCHES * SIZE + 1))


def test_a_server_that_stays_down_is_a_clear_error_and_the_store_recovers(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    store = PostgresEventStore.open(
        postgres_url, replica_path=tmp_path / "history.db", retry_for=1.0
    )
    try:
        store.append(turn("before the outage"))
        postgres_server.stop("immediate")  # a crash: the server comes back through recovery
        try:
            with pytest.raises(StoreUnavailable, match="check that the server is up"):
                store.append(turn("during the outage"))
        finally:
            postgres_server.start()
        store.retry_for = 30.0
        assert store.append(turn("after the outage")) == 2
        assert [e.content for e in store.span(1, 9)] == ["before the outage", "after the outage"]
    finally:
        store.close()
