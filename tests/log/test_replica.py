"""The local replica of a shared store: synced by seq, rebuilt when lost, never someone's store.

Source: a real PostgreSQL store. The replica is an ordinary SQLite store that ``open_surface``
opens; every check reads it the way ``ms`` does.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import turn

from needs import import_or_missing
from scrollctx.errors import IntegrityError
from scrollctx.log import EventLog, Kind, NewEvent
from scrollctx.surface import open_surface

import_or_missing("psycopg")
from scrollctx.log._postgres import PostgresEventStore  # noqa: E402


@pytest.fixture
def shared(postgres_url: str, tmp_path: Path) -> Iterator[PostgresEventStore]:
    store = PostgresEventStore.open(postgres_url, replica_path=tmp_path / "host" / "history.db")
    yield store
    store.close()


def test_a_sync_copies_only_the_new_rows_and_ms_reads_them(shared: PostgresEventStore) -> None:
    shared.append_many([turn("the kestrel nests on the tower"), turn("a heron by the river")])
    first = shared.replica.sync()
    assert (first.added, first.last_seq, first.rebuilt) == (2, 2, None)
    assert shared.replica.sync().added == 0  # nothing new: nothing copied
    shared.append(turn("the kestrel came back"))
    assert shared.replica.sync().added == 1
    with open_surface(shared.path) as ms:
        assert sorted(hit["seq"] for hit in ms.search("kestrel")) == [1, 3]


def test_payloads_reach_the_replica_folder_that_ms_reads(shared: PostgresEventStore) -> None:
    big = "line of a long tool output\n" * 2000
    seq = shared.append(NewEvent(session_id="s1", kind=Kind.TOOL_RESULT, content=big))
    shared.refresh()
    with open_surface(shared.path) as ms:
        assert ms.expand([seq])[0]["content"] == big


def test_a_deleted_replica_is_rebuilt_from_scratch(shared: PostgresEventStore) -> None:
    shared.append_many([turn("one"), turn("two")])
    shared.refresh()
    shared.replica.close()
    shared.path.unlink()
    result = shared.replica.sync()
    assert (result.added, result.last_seq) == (2, 2)
    with EventLog.open(shared.path, verify=True) as log:
        assert [e.content for e in log.span(1, 2)] == ["one", "two"]


def test_a_damaged_replica_is_rebuilt_not_served(shared: PostgresEventStore) -> None:
    shared.append_many([turn(f"event {i}") for i in range(50)])
    shared.refresh()
    shared.replica.close()
    shared.path.write_bytes(b"this is not a SQLite file any more" * 100)
    result = shared.replica.sync()
    assert result.rebuilt is not None and "damaged" in result.rebuilt
    assert result.last_seq == 50
    assert shared.execute("SELECT count(*) FROM conversation_history")[0][0] == 50


def test_a_replica_of_another_store_is_rebuilt(
    postgres_server: object, postgres_url: str, tmp_path: Path
) -> None:
    from postgres_server import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    replica = tmp_path / "host" / "history.db"
    other_url = postgres_server.url(postgres_server.create_database())
    with PostgresEventStore.open(other_url, replica_path=replica) as other:
        other.append_many([turn("from the other store")] * 3)
        other.refresh()
    with PostgresEventStore.open(postgres_url, replica_path=replica) as mine:
        mine.append(turn("mine"))
        result = mine.replica.sync()
        assert result.rebuilt is not None and "another store" in result.rebuilt
        assert mine.execute("SELECT content FROM conversation_history")[0][0] == "mine"


def test_a_replica_ahead_of_its_source_is_rebuilt(
    shared: PostgresEventStore, postgres_url: str, tmp_path: Path
) -> None:
    # The source was restored from an older backup: the replica holds seqs it no longer has.
    shared.append_many([turn("a"), turn("b")])
    shared.refresh()
    with shared.replica.log.atomic() as conn:
        conn.execute("UPDATE sqlite_sequence SET seq = 99 WHERE name = 'conversation_history'")
    result = shared.replica.sync()
    assert result.rebuilt is not None and "is ahead of it" in result.rebuilt
    assert result.last_seq == 2


def test_a_source_restored_from_an_older_backup_then_written_is_replicated_anew(
    postgres_server: object, postgres_url: str, tmp_path: Path
) -> None:
    # pg_dump after two rows, two more rows reach the replica, the database is restored from
    # the dump and three new rows take seqs 3-5: the replica must not keep the lost 3 and 4.
    from postgres_server import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    dump, name = tmp_path / "backup.dump", postgres_url.rsplit("/", 1)[1]
    replica = tmp_path / "host" / "history.db"
    with PostgresEventStore.open(postgres_url, replica_path=replica) as store:
        store.append_many([turn("one"), turn("two")])
        subprocess.run([str(postgres_server.bindir / "pg_dump"), "-Fc", "-f", str(dump),
                        postgres_url], check=True)  # fmt: skip
        store.append_many([turn("three, lost"), turn("four, lost")])
        assert store.replica.sync().rebuilt is None
        assert store.replica.sync().rebuilt is None  # an unchanged source: no rebuild
    with postgres_server.admin() as admin:
        admin.execute(f"DROP DATABASE {name}")
        admin.execute(f"CREATE DATABASE {name}")
    subprocess.run([str(postgres_server.bindir / "pg_restore"), "-d", postgres_url, str(dump)],
                   check=True)  # fmt: skip
    with PostgresEventStore.open(postgres_url, replica_path=replica) as store:
        store.append_many([turn("three"), turn("four"), turn("five")])
        result = store.replica.sync()
        assert result.rebuilt is not None and "restored from an older backup" in result.rebuilt
        contents = [e.content for e in store.replica.log.span(1, 5)]
        assert contents == ["one", "two", "three", "four", "five"]


def test_a_real_store_in_the_replica_path_is_refused_not_deleted(
    postgres_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "host" / "history.db"
    with EventLog.open(path) as someones:
        someones.append(turn("somebody's own history"))
    with PostgresEventStore.open(postgres_url, replica_path=path) as store:
        with pytest.raises(IntegrityError, match="not a replica"):
            store.refresh()
    with EventLog.open(path) as someones:
        assert someones.get(1).content == "somebody's own history"


def test_a_damaged_row_of_the_source_is_an_error_and_the_replica_is_kept(
    postgres_server: object, shared: PostgresEventStore, caplog: pytest.LogCaptureFixture
) -> None:
    from postgres_server import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    shared.append_many([turn(f"event {i}") for i in range(10)])
    shared.refresh()
    inode = shared.path.stat().st_ino
    shared.append_many([turn("damaged later"), turn("after it")])
    with postgres_server.admin(shared.where.rsplit("/", 1)[1]) as admin:  # a hand edit
        admin.execute("ALTER TABLE conversation_history DISABLE TRIGGER USER")
        admin.execute("UPDATE conversation_history SET content = 'edited' WHERE seq = 11")
    with pytest.raises(IntegrityError, match="seq 11 in .* does not match its checksum"):
        shared.replica.sync()
    assert "rebuilding" not in caplog.text  # the replica was not thrown away for it
    assert shared.path.stat().st_ino == inode and shared.replica.log.last_seq() == 10
