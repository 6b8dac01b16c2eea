"""What only the PostgreSQL store faces: logins, roles, rules enforced in the server, lost links.

Everything runs against a real server on loopback (``postgres_server``); the connection that
breaks mid-COMMIT goes through :class:`CuttingProxy`, a real TCP relay that cuts both sides.
"""

from __future__ import annotations

import inspect
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import import_or_missing
from postgres_server import PostgresServer
from scrollctx.errors import IntegrityError, StoreAccessDenied, StoreError, StoreUnavailable
from scrollctx.log import Kind, NewEvent

psycopg = import_or_missing("psycopg")
from scrollctx.log._postgres import PostgresEventStore  # noqa: E402
from scrollctx.log._postgres_errors import translate  # noqa: E402


def _turn(text: str, key: str | None = None) -> NewEvent:
    return NewEvent(session_id="s1", kind=Kind.USER_MESSAGE, role="user", content=text,
                    dedup_key=key)  # fmt: skip


def _open(url: str, tmp_path: Path, **options: Any) -> PostgresEventStore:
    return PostgresEventStore.open(url, replica_path=tmp_path / "replica" / "history.db", **options)


@pytest.fixture
def pg_store(postgres_url: str, tmp_path: Path) -> Iterator[PostgresEventStore]:
    store = _open(postgres_url, tmp_path)
    yield store
    store.close()


def test_a_wrong_password_is_access_denied_and_the_password_is_not_shown(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.url("postgres", password="not-the-password")
    with pytest.raises(StoreAccessDenied, match="password authentication failed") as info:
        _open(url, tmp_path)
    assert "not-the-password" not in str(info.value)
    assert info.value.exit_code == 2


def test_a_server_that_is_not_there_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreUnavailable, match="cannot reach PostgreSQL.*start the server"):
        _open(f"postgresql://u:p@127.0.0.1:{port}/db", tmp_path)


def test_a_read_only_role_reads_and_syncs_but_may_not_append(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    with _open(postgres_url, tmp_path / "owner") as owner:
        owner.append(_turn("written by the writer"))
    database = postgres_url.rsplit("/", 1)[1]
    with postgres_server.admin(database) as admin:
        admin.execute("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'")
        admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    url = postgres_server.url(database, user="reader", password="reader-pw")
    with _open(url, tmp_path / "reader") as reader:
        assert reader.get(1).content == "written by the writer"
        assert reader.refresh() == 1
        with pytest.raises(StoreAccessDenied, match="may not append.*writer role"):
            reader.append(_turn("not allowed"))
    with _open(postgres_url, tmp_path / "owner") as owner:
        assert owner.count() == 1


def test_a_role_that_may_not_migrate_a_new_database_is_told_so(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    database = postgres_server.create_database()
    with postgres_server.admin(database) as admin:
        admin.execute("CREATE ROLE visitor LOGIN PASSWORD 'v'")
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    with pytest.raises(StoreAccessDenied, match="may not migrate"):
        _open(postgres_server.url(database, user="visitor", password="v"), tmp_path)


def test_another_programs_conversation_history_is_not_taken_over(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    database = postgres_server.create_database()
    with postgres_server.admin(database) as admin:
        admin.execute("CREATE TABLE conversation_history (id INTEGER)")
    with pytest.raises(IntegrityError, match="did not create"):
        _open(postgres_server.url(database), tmp_path)


def test_the_server_itself_refuses_seqs_at_or_below_the_head(
    pg_store: PostgresEventStore, postgres_url: str
) -> None:
    pg_store.append_many([_turn("one"), _turn("two" * 10_000)])  # "two…" has a payload row
    later = pg_store.get(2).to_dict() | {"seq": 10}
    pg_store.import_events([type(pg_store.get(2))(**later)])  # seqs 3..9 stay free
    insert = (
        "INSERT INTO conversation_history (seq, session_id, kind, created_at, checksum) "
        "VALUES (%s, 's', 'k', 'now', 'unchecked')"
    )
    with psycopg.connect(postgres_url, autocommit=True) as raw:
        with pytest.raises(psycopg.Error, match="seq 5 is not above the log head 10"):
            raw.execute(insert, (5,))  # a free seq, but a follower may have passed it already
        raw.execute(insert, (11,))  # above the head: the trigger takes the lock and advances it
        with pytest.raises(psycopg.Error, match="may only rise"):
            raw.execute("UPDATE log_head SET last_seq = 1")
        for sql in ("DELETE FROM payloads", "TRUNCATE payloads CASCADE",
                    "TRUNCATE conversation_history", "DELETE FROM log_head"):  # fmt: skip
            with pytest.raises(psycopg.Error, match="append-only"):
                raw.execute(sql)
        with pytest.raises(psycopg.Error, match="check"):
            raw.execute("INSERT INTO payloads VALUES ('00', 1, 'x'::bytea)")  # wrong digest
    assert pg_store.count() == 4 and pg_store.last_seq() == 11
    with pytest.raises(IntegrityError, match="seq 11 .* does not match its checksum"):
        pg_store.get(11)  # the raw row's checksum is wrong: it is never served


def test_every_psycopg_error_class_becomes_a_store_error() -> None:
    classes = [
        cls
        for _, cls in inspect.getmembers(psycopg.errors, inspect.isclass)
        if issubclass(cls, psycopg.Error)
    ]
    assert len(classes) > 200
    for cls in classes:
        assert isinstance(translate(cls("boom"), "db", "append"), StoreError), cls
    assert isinstance(translate(psycopg.errors.AdminShutdown("x"), "db", "a"), StoreUnavailable)
    assert isinstance(translate(psycopg.OperationalError("x"), "db", "a"), StoreUnavailable)
    denied = translate(psycopg.errors.InsufficientPrivilege("x"), "db", "append")
    assert isinstance(denied, StoreAccessDenied)
    assert isinstance(
        translate(psycopg.errors.ReadOnlySqlTransaction("x"), "db", "append"), StoreAccessDenied
    )
    assert type(translate(psycopg.errors.UniqueViolation("x"), "db", "a")) is StoreError


class CuttingProxy:
    """A TCP relay to the server that cuts the connection around the client's next COMMIT.

    ``cut = "after"``: the server receives the COMMIT and answers it, but the answer never
    reaches the client (it cannot know whether the batch committed). ``cut = "before"``: the
    COMMIT never reaches the server (the transaction is rolled back when the link drops).
    """

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.cut: str | None = None
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        muted, answered = threading.Event(), threading.Event()

        def pump() -> None:  # server -> client, swallowed once muted
            try:
                while data := server.recv(65536):
                    if muted.is_set():
                        answered.set()
                        continue
                    client.sendall(data)
            except OSError:
                pass

        threading.Thread(target=pump, daemon=True).start()
        try:
            while data := client.recv(65536):
                if self.cut is not None and b"COMMIT\x00" in data:
                    mode, self.cut = self.cut, None
                    if mode == "after":
                        muted.set()
                        server.sendall(data)
                        answered.wait(10)  # the server has committed and said so
                    self.cuts += 1
                    return
                server.sendall(data)
        except OSError:
            pass
        finally:
            for end in (client, server):  # shutdown wakes the pump and tells the server now
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()


@pytest.mark.parametrize("cut", ["after", "before"])
def test_a_batch_whose_commit_was_cut_is_resolved_never_doubled(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path, cut: str
) -> None:
    proxy = CuttingProxy(postgres_server.port)
    database = postgres_url.rsplit("/", 1)[1]
    url = f"{postgres_server.url(database).replace(str(postgres_server.port), str(proxy.port))}"
    try:
        with _open(url, tmp_path) as store:
            store.append(_turn("before the cut"))
            proxy.cut = cut
            seqs = store.append_many([_turn("no dedup key here"), _turn("nor here")])
            assert proxy.cuts == 1
            assert seqs == [2, 3]
            assert [e.content for e in store.span(1, 10)] == [
                "before the cut", "no dedup key here", "nor here"
            ]  # fmt: skip
            assert store.last_seq() == 3
    finally:
        proxy.close()
