"""The Event Log's guarantees, on every backend: append-only, idempotent, atomic, searchable.

Each test runs twice (``backend`` is parametrised): on a SQLite file and on a real PostgreSQL
server, where search goes through the host's local replica (``store.execute``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from store_helpers import Backend, index_matches_the_rows, matches
from store_helpers import turn as _turn

from scrollctx.errors import StoreError, UsageError
from scrollctx.log import ArtifactRef, EventLog, EventStore, Kind, NewEvent, ToolResultRef


def test_append_assigns_increasing_seqs_and_round_trips(store: EventStore) -> None:
    first = store.append(_turn("plan a trip to Lisbon", metadata={"date": "2024-05-01"}))
    second = store.append(
        NewEvent(
            session_id="s1",
            kind=Kind.TOOL_CALL,
            name="search_flights",
            tool_call_id="call-1",
            tool_input={"to": "LIS", "max": 3},
            step_index=2,
            msg_index=7,
        )
    )
    assert second > first
    stored = store.get(second)
    assert stored.tool_input == {"to": "LIS", "max": 3}
    assert (stored.step_index, stored.msg_index, stored.name) == (2, 7, "search_flights")
    assert store.get(first).metadata == {"date": "2024-05-01"}
    assert store.get(first).created_at.endswith("Z")
    assert store.get(first).searchable is True


def test_rows_cannot_be_updated_or_deleted_even_behind_the_stores_back(
    store: EventStore, backend: Backend
) -> None:
    seq = store.append(_turn("immutable"))
    with pytest.raises(backend.db_error, match="append-only"):
        backend.raw(f"UPDATE conversation_history SET content = 'changed' WHERE seq = {seq}")
    with pytest.raises(backend.db_error, match="append-only"):
        backend.raw("DELETE FROM conversation_history")
    assert store.get(seq).content == "immutable"


def test_dedup_key_makes_appends_idempotent_without_burning_seqs(store: EventStore) -> None:
    first = store.append(_turn("once", key="k1"))
    again = store.append(_turn("once, resent", key="k1"))
    other_session = store.append(_turn("same key elsewhere", key="k1", session="s2"))
    in_one_batch = store.append_many([_turn("twin", key="k2"), _turn("twin again", key="k2")])
    assert again == first
    assert other_session == first + 1
    assert in_one_batch == [first + 2, first + 2]
    assert store.count() == 3
    assert store.get(first).content == "once"
    assert store.last_seq() == first + 2


def test_seq_is_never_reused_after_a_rolled_back_batch(store: EventStore) -> None:
    store.append(_turn("kept"))
    with pytest.raises(UsageError, match="an event needs a non-empty session_id"):
        store.append_many([_turn("lost with its batch"), NewEvent(session_id="", kind="x")])
    assert store.count() == 1
    later = store.append(_turn("after"))
    assert later == 2  # the failed batch was rejected before anything was inserted


def test_batch_is_atomic_when_the_database_refuses_a_row(
    store: EventStore, backend: Backend
) -> None:
    before = store.count()
    with pytest.raises(backend.db_error, match="no_such_table"):
        with store.atomic() as conn:
            store.append(_turn("inside"))
            conn.execute("INSERT INTO no_such_table VALUES (1)")
    assert store.count() == before
    assert store.append(_turn("next")) == 1  # the rolled-back row's seq was not consumed


def test_nested_atomic_rolls_back_only_the_inner_block(store: EventStore) -> None:
    with store.atomic():
        store.append(_turn("outer"))
        with pytest.raises(UsageError, match="abandon inner"):
            with store.atomic():
                store.append(_turn("inner"))
                raise UsageError("abandon inner")
        assert store.last_seq() == 1
    assert [e.content for e in store.span(1, 99)] == ["outer"]


_COMMIT_MODE = {
    "sqlite": ("PRAGMA synchronous", {2: "flushed", 1: "unflushed"}),
    "postgresql": ("SHOW synchronous_commit", {"on": "flushed", "off": "unflushed"}),
}


def test_a_non_durable_block_commits_without_the_flush_and_only_that_block(
    store: EventStore, backend: Backend
) -> None:
    query, modes = _COMMIT_MODE[backend.name]

    def mode(conn: object) -> str:
        return modes[conn.execute(query).fetchone()[0]]  # type: ignore[attr-defined]

    with store.atomic(durable=False) as conn:
        store.append(_turn("a reply that can be written again"))
        with store.atomic() as inner:  # nested: the outermost block decides
            store.append(_turn("inside it"))
            assert mode(inner) == "unflushed"
        assert mode(conn) == "unflushed"
    # committed: another connection sees both rows at once
    assert backend.raw("SELECT count(*) FROM conversation_history")[0][0] == 2
    with store.atomic() as conn:
        assert mode(conn) == "flushed"
    with pytest.raises(UsageError, match="rolled back"):
        with store.atomic(durable=False):
            store.append(_turn("lost"))
            raise UsageError("rolled back")
    with store.atomic() as conn:
        assert mode(conn) == "flushed"  # also after a rollback
    assert store.count() == 2


def test_flush_puts_the_non_durable_commits_on_disk(
    store: EventStore, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite: one fsync of the -wal, which holds every commit since the last checkpoint.
    # PostgreSQL: the server's WAL is flushed past everything committed before the call.
    with store.atomic(durable=False):
        store.append(_turn("a reply that can be written again"))
    if backend.name == "sqlite":
        synced: list[str] = []
        real_fsync = os.fsync

        def fsync(fd: int) -> None:  # observing, not driving
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        store.flush()
        assert synced == [f"{store.path}-wal"]
        return
    written = backend.raw("SELECT pg_current_wal_insert_lsn()")[0][0]
    store.flush()
    flushed = backend.raw("SELECT pg_current_wal_flush_lsn()")[0][0]
    assert backend.raw(f"SELECT '{flushed}'::pg_lsn >= '{written}'::pg_lsn")[0][0]
    assert store.count() == 1  # the flush wrote no event


def test_last_seq_inside_atomic_is_the_high_water_mark_of_the_write(store: EventStore) -> None:
    # The importer's pattern: seqs above the mark read inside the write lock are its own.
    store.append(_turn("first", key="a"))
    with store.atomic():
        before = store.last_seq()
        seqs = store.append_many([_turn("first", key="a"), _turn("second", key="b")])
    assert before == 1 and seqs == [1, 2]


def test_fts_indexes_prose_code_and_headline_but_not_unsearchable_rows(
    store: EventStore,
) -> None:
    store.append(_turn("We fixed the parser.\n```python\nretry_budget = 3\n```\nDone."))
    store.append(_turn("echo of a recall", searchable=False))
    store.append(
        NewEvent(
            session_id="s1",
            kind=Kind.MODEL_TURN,
            role="assistant",
            content="ok",
            headline="parser fixed | tests green",
        )
    )

    def hits(column: str, term: str) -> list[int]:
        rows = store.execute(
            "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ?",
            (f"{column} : {term}",),
        )
        return [r[0] for r in rows]

    assert hits("code", "retry_budget") == [1]
    assert hits("prose", "retry_budget") == []
    assert hits("prose", "parser") == [1]
    assert hits("headline", "green") == [3]
    assert hits("prose", "recall") == []


def test_every_write_path_indexes_exactly_the_committed_rows(store: EventStore) -> None:
    store.append(_turn("single alpha"))
    store.append_many([_turn("batch bravo", key="b"), _turn("batch charlie")])
    store.append_many([_turn("batch bravo", key="b"), _turn("after repeat delta")])
    store.append_many([_turn("only repeats", key="b")])
    with store.atomic():
        store.append(_turn("outer echo"))
        with pytest.raises(UsageError, match="abandon inner"):
            with store.atomic():
                store.append_many([_turn("inner foxtrot"), _turn("inner golf")])
                raise UsageError("abandon inner")
        store.append(_turn("after savepoint hotel"))
    with pytest.raises(UsageError, match="abandon all"):
        with store.atomic():
            store.append(_turn("rolled back india"))
            raise UsageError("abandon all")
    store.append(_turn("last juliet"))
    index_matches_the_rows(store)
    found = {word: matches(store, word) for word in
             ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
              "india", "juliet")}  # fmt: skip
    assert found == {
        "alpha": [1], "bravo": [2], "charlie": [3], "delta": [4], "echo": [5],
        "foxtrot": [], "golf": [], "hotel": [6], "india": [], "juliet": [7],
    }  # fmt: skip
    assert store.count() == 7


def test_lone_surrogates_are_stored_as_their_escapes_not_refused(store: EventStore) -> None:
    # Not Unicode, so no UTF-8 store can hold them: from a file name os.fsdecode could not
    # decode, or a JSON "\ud800" escape in an imported file or a model's reply.
    lone = "\udcff"
    seq = store.append(
        NewEvent(
            session_id=f"openai:chat{lone}", kind=Kind.TOOL_CALL, content=f"caf{lone} ok",
            name=f"tool{lone}", tool_input={f"key{lone}": [f"value{lone}"]},
            metadata={"source_file": f"/tmp/chat{lone}.json"},
        )
    )  # fmt: skip
    big = store.append(NewEvent(session_id="s1", kind=Kind.TOOL_RESULT, content=lone * 20_000))
    event = store.get(seq)  # read back (and verified against its checksum)
    assert (event.session_id, event.content, event.name) == (
        "openai:chat\\udcff",
        "caf\\udcff ok",
        "tool\\udcff",
    )
    assert event.tool_input == {"key\\udcff": ["value\\udcff"]}
    assert event.metadata["source_file"] == "/tmp/chat\\udcff.json"
    assert store.full_text(store.get(big)) == "\\udcff" * 20_000


def test_label_is_written_for_rows_without_a_headline(store: EventStore) -> None:
    seq = store.append(_turn("[Session 4 | 2024-07-05] user: Certainly! I added 10 tasks."))
    headlined = store.append(_turn("body", headline="my own headline"))
    assert store.get(seq).label == "I added 10 tasks."
    assert store.get(headlined).label is None


def test_large_content_is_externalized_and_materialized(store: EventStore) -> None:
    big = "row;" * 10_000
    seq = store.append(NewEvent(session_id="s1", kind=Kind.TOOL_RESULT, content=big))
    event = store.get(seq)
    assert event.is_externalized and event.payload_size == len(big)
    assert len(event.content) < 3000 and "externalized" in event.content
    ref = store.payload_ref(event)
    assert isinstance(ref, ToolResultRef) and ref.text() == big
    assert store.full_text(event) == big
    assert event.payload_sha256 is not None and store.payloads.has(event.payload_sha256)


def test_payload_handles_are_lazy_and_typed_by_kind(store: EventStore) -> None:
    data = {"rows": list(range(5000))}
    text = json.dumps(data)
    result = store.get(store.append(NewEvent(session_id="s1", kind="tool_result", content=text)))
    turn = store.get(store.append(NewEvent(session_id="s1", kind="model_turn", content=text)))
    small = store.get(store.append(_turn("inline")))
    tool_ref, artifact = store.payload_ref(result), store.payload_ref(turn)
    assert isinstance(tool_ref, ToolResultRef) and isinstance(artifact, ArtifactRef)
    assert store.payload_ref(small) is None
    assert tool_ref.size == len(text.encode()) and tool_ref.preview == result.content
    assert tool_ref.preview.startswith(text[:100]) and "ms.expand" in tool_ref.preview
    assert (
        artifact.json() == data
        and repr(artifact) == f"ArtifactRef(seq={turn.seq}, size={artifact.size})"
    )


def test_events_and_span_read_in_seq_order(store: EventStore) -> None:
    seqs = store.append_many(_turn(f"turn {i}") for i in range(1200))
    assert [e.seq for e in store.events(list(reversed(seqs)))] == seqs
    assert [e.seq for e in store.span(seqs[10], seqs[12])] == seqs[10:13]
    assert [e.seq for e in store.session_events("s1", after_seq=seqs[-3])] == seqs[-2:]
    window = store.session_events(session_id="s1", after_seq=seqs[3], before_seq=seqs[6])
    assert [e.seq for e in window] == seqs[4:6]
    assert [e.seq for e in store.events_after(seqs[5], 3)] == seqs[6:9]
    assert store.events_after(seqs[-1], 10) == []
    with pytest.raises(UsageError, match="no event at seq 99999"):
        store.get(99_999)


def test_imported_events_keep_their_seqs_and_must_ascend(store: EventStore) -> None:
    source = [store.get(s) for s in store.append_many([_turn("one"), _turn("two", key="k")])]
    moved = [
        type(event)(**{**event.to_dict(), "seq": event.seq + 10, "session_id": "copy"})
        for event in source
    ]
    store.import_events(moved)
    assert [e.to_dict() for e in store.span(11, 12)] == [e.to_dict() for e in moved]
    assert store.last_seq() == 12
    assert matches(store, "two") == [2, 12]
    with pytest.raises(UsageError, match="ascend above the last seq 12"):
        store.import_events(moved)
    assert store.append(_turn("after the import")) == 13


def test_an_import_overlapping_the_last_seq_is_refused_whole(store: EventStore) -> None:
    # The batch ascends and ends above the log, but its first seq is already taken.
    source = [store.get(s) for s in store.append_many([_turn("one"), _turn("two")])]
    overlapping = [
        type(event)(**{**event.to_dict(), "seq": event.seq + 1, "session_id": "copy"})
        for event in source
    ]
    with pytest.raises(UsageError, match=r"ascend above the last seq 2 \(got 2…\)"):
        store.import_events(overlapping)
    assert store.last_seq() == 2 and store.get(2).content == "two"


def test_refresh_returns_the_last_seq_readers_of_path_can_see(store: EventStore) -> None:
    assert store.refresh() == 0
    store.append_many([_turn("a"), _turn("b")])
    assert store.refresh() == 2
    assert store.path.is_file()


def test_reopen_keeps_everything(backend: Backend) -> None:
    with backend.open() as first:
        first.append(_turn("persisted"))
    with backend.open() as again:
        assert again.count() == 1
        again.check()
        migrations = backend.raw("SELECT count(*) FROM _migrations")[0][0]
        assert migrations > 0
    with backend.open() as third:
        assert backend.raw("SELECT count(*) FROM _migrations")[0][0] == migrations
        assert third.get(1).content == "persisted"


def test_empty_session_or_kind_is_refused(store: EventStore) -> None:
    with pytest.raises(UsageError, match="session_id"):
        store.append(NewEvent(session_id="", kind="x"))
    with pytest.raises(UsageError, match="kind"):
        store.append(NewEvent(session_id="s", kind=""))
    assert store.count() == 0


def _segments(log: EventLog) -> int:
    return log._conn.execute(
        "SELECT count(DISTINCT segid) FROM conversation_history_fts_idx"
    ).fetchone()[0]


def test_merging_the_search_index_leaves_one_segment_and_the_same_matches(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "history.db") as log:
        for batch in range(4):  # each committed batch leaves FTS5 a segment of its own
            log.append_many([_turn(f"adoption batch {batch} row {i}") for i in range(5)])
        before = log._conn.execute(
            "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH "
            "'adoption' ORDER BY rowid"
        ).fetchall()
        assert _segments(log) == 4
        log.merge_search_index()
        assert _segments(log) == 1
        after = log._conn.execute(
            "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH "
            "'adoption' ORDER BY rowid"
        ).fetchall()
        assert after == before and len(after) == 20


def test_a_merge_the_lock_refuses_is_a_store_error_and_durable_is_by_name(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path, lock_timeout=0.2) as log:
        log.append(_turn("adoption"))
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="merge"):
                log.merge_search_index()
        finally:
            holder.rollback()
            holder.close()
        with pytest.raises(TypeError):
            log.atomic(False)  # type: ignore[misc]
