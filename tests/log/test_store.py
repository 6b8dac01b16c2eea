"""The Event Log on real SQLite files: append-only, idempotent, durable, honest about damage."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from scrollctx.errors import IntegrityError, PayloadMissing, StoreError, UsageError
from scrollctx.log import ArtifactRef, EventLog, Kind, NewEvent, ToolResultRef
from scrollctx.log._schema import MIGRATIONS


def _turn(text: str, *, key: str | None = None, session: str = "s1", **extra: object) -> NewEvent:
    return NewEvent(
        session_id=session,
        kind=Kind.USER_MESSAGE,
        role="user",
        content=text,
        dedup_key=key,
        **extra,
    )  # type: ignore[arg-type]


def test_append_assigns_increasing_seqs_and_round_trips(event_log: EventLog) -> None:
    first = event_log.append(_turn("plan a trip to Lisbon", metadata={"date": "2024-05-01"}))
    second = event_log.append(
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
    stored = event_log.get(second)
    assert stored.tool_input == {"to": "LIS", "max": 3}
    assert (stored.step_index, stored.msg_index, stored.name) == (2, 7, "search_flights")
    assert event_log.get(first).metadata == {"date": "2024-05-01"}
    assert event_log.get(first).created_at.endswith("Z")


def test_rows_cannot_be_updated_or_deleted(event_log: EventLog, store_dir: Path) -> None:
    seq = event_log.append(_turn("immutable"))
    conn = sqlite3.connect(store_dir / "history.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE conversation_history SET content = 'changed' WHERE seq = ?", (seq,))
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM conversation_history")
    conn.close()
    assert event_log.get(seq).content == "immutable"


def test_dedup_key_makes_appends_idempotent_without_burning_seqs(event_log: EventLog) -> None:
    first = event_log.append(_turn("once", key="k1"))
    again = event_log.append(_turn("once, resent", key="k1"))
    other_session = event_log.append(_turn("same key elsewhere", key="k1", session="s2"))
    assert again == first
    assert other_session == first + 1
    assert event_log.count() == 2
    assert event_log.get(first).content == "once"


def test_seq_is_never_reused_after_a_rolled_back_batch(event_log: EventLog) -> None:
    event_log.append(_turn("kept"))
    with pytest.raises(UsageError):
        event_log.append_many([_turn("lost with its batch"), NewEvent(session_id="", kind="x")])
    assert event_log.count() == 1
    later = event_log.append(_turn("after"))
    assert later == 2  # the failed batch was rejected before anything was inserted


def test_batch_is_atomic_when_the_database_refuses_a_row(event_log: EventLog) -> None:
    before = event_log.count()
    with pytest.raises(sqlite3.OperationalError):
        with event_log.atomic() as conn:
            event_log.append(_turn("inside"))
            conn.execute("INSERT INTO no_such_table VALUES (1)")
    assert event_log.count() == before


def test_nested_atomic_rolls_back_only_the_inner_block(event_log: EventLog) -> None:
    with event_log.atomic():
        event_log.append(_turn("outer"))
        with pytest.raises(UsageError):
            with event_log.atomic():
                event_log.append(_turn("inner"))
                raise UsageError("abandon inner")
    assert [e.content for e in event_log.span(1, 99)] == ["outer"]


def test_fts_indexes_prose_code_and_headline_but_not_unsearchable_rows(
    event_log: EventLog,
) -> None:
    event_log.append(_turn("We fixed the parser.\n```python\nretry_budget = 3\n```\nDone."))
    event_log.append(_turn("echo of a recall", searchable=False))
    event_log.append(
        NewEvent(
            session_id="s1",
            kind=Kind.MODEL_TURN,
            role="assistant",
            content="ok",
            headline="parser fixed | tests green",
        )
    )

    def hits(column: str, term: str) -> list[int]:
        rows = event_log.execute(
            "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ?",
            (f"{column} : {term}",),
        )
        return [r[0] for r in rows]

    assert hits("code", "retry_budget") == [1]
    assert hits("prose", "retry_budget") == []
    assert hits("prose", "parser") == [1]
    assert hits("headline", "green") == [3]
    assert hits("prose", "recall") == []


def _index_matches_the_rows(log: EventLog) -> None:
    # rank=1 makes FTS5 compare its index with the content view itself: a searchable row
    # missing from the index (or an entry without its row) fails as "malformed".
    log.execute(
        "INSERT INTO conversation_history_fts(conversation_history_fts, rank) "
        "VALUES ('integrity-check', 1)"
    )


def _matches(log: EventLog, term: str) -> list[int]:
    rows = log.execute(
        "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? "
        "ORDER BY rowid",
        (term,),
    )
    return [r[0] for r in rows]


def test_every_write_path_indexes_exactly_the_committed_rows(event_log: EventLog) -> None:
    event_log.append(_turn("single alpha"))
    event_log.append_many([_turn("batch bravo", key="b"), _turn("batch charlie")])
    event_log.append_many([_turn("batch bravo", key="b"), _turn("after repeat delta")])
    event_log.append_many([_turn("only repeats", key="b")])
    with event_log.atomic():
        event_log.append(_turn("outer echo"))
        with pytest.raises(UsageError):
            with event_log.atomic():
                event_log.append_many([_turn("inner foxtrot"), _turn("inner golf")])
                raise UsageError("abandon inner")
        event_log.append(_turn("after savepoint hotel"))
    with pytest.raises(UsageError):
        with event_log.atomic():
            event_log.append(_turn("rolled back india"))
            raise UsageError("abandon all")
    event_log.append(_turn("last juliet"))
    _index_matches_the_rows(event_log)
    found = {word: _matches(event_log, word) for word in
             ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
              "india", "juliet")}  # fmt: skip
    assert found == {
        "alpha": [1], "bravo": [2], "charlie": [3], "delta": [4], "echo": [5],
        "foxtrot": [], "golf": [], "hotel": [6], "india": [], "juliet": [7],
    }  # fmt: skip
    assert event_log.count() == 7


def test_an_index_gap_would_be_caught(event_log: EventLog) -> None:
    # The check above must be able to fail: a row written around append_many is not indexed.
    event_log.append(_turn("indexed"))
    with event_log.atomic() as conn:
        conn.execute(
            "INSERT INTO conversation_history(session_id, kind, content, created_at) "
            "VALUES ('s1', 'user_message', 'smuggled', '2024-01-01T00:00:00Z')"
        )
    assert _matches(event_log, "smuggled") == []
    with pytest.raises(IntegrityError, match="malformed"):
        _index_matches_the_rows(event_log)


def test_label_is_written_for_rows_without_a_headline(event_log: EventLog) -> None:
    seq = event_log.append(_turn("[Session 4 | 2024-07-05] user: Certainly! I added 10 tasks."))
    headlined = event_log.append(_turn("body", headline="my own headline"))
    assert event_log.get(seq).label == "I added 10 tasks."
    assert event_log.get(headlined).label is None


def test_large_content_is_externalized_and_materialized(event_log: EventLog) -> None:
    big = "row;" * 10_000
    seq = event_log.append(NewEvent(session_id="s1", kind=Kind.TOOL_RESULT, content=big))
    event = event_log.get(seq)
    assert event.is_externalized and event.payload_size == len(big)
    assert len(event.content) < 3000 and "externalized" in event.content
    ref = event_log.payload_ref(event)
    assert isinstance(ref, ToolResultRef) and ref.text() == big
    assert event_log.full_text(event) == big


def test_payload_handles_are_lazy_and_typed_by_kind(event_log: EventLog) -> None:
    data = {"rows": list(range(5000))}
    text = json.dumps(data)
    result = event_log.get(
        event_log.append(NewEvent(session_id="s1", kind="tool_result", content=text))
    )
    turn = event_log.get(
        event_log.append(NewEvent(session_id="s1", kind="model_turn", content=text))
    )
    small = event_log.get(event_log.append(_turn("inline")))
    tool_ref, artifact = event_log.payload_ref(result), event_log.payload_ref(turn)
    assert isinstance(tool_ref, ToolResultRef) and isinstance(artifact, ArtifactRef)
    assert event_log.payload_ref(small) is None
    assert tool_ref.size == len(text.encode()) and tool_ref.preview == result.content
    assert tool_ref.preview.startswith(text[:100]) and "ms.expand" in tool_ref.preview
    assert (
        artifact.json() == data
        and repr(artifact) == f"ArtifactRef(seq={turn.seq}, size={artifact.size})"
    )


def test_same_payload_is_stored_once(event_log: EventLog) -> None:
    big = "x" * 40_000
    a = event_log.get(event_log.append(NewEvent(session_id="s1", kind="tool_result", content=big)))
    b = event_log.get(event_log.append(NewEvent(session_id="s2", kind="tool_result", content=big)))
    assert a.payload_sha256 == b.payload_sha256
    assert len([p for p in event_log.payloads.root.rglob("*") if p.is_file()]) == 1


def test_missing_payload_is_reported_not_empty(event_log: EventLog) -> None:
    seq = event_log.append(NewEvent(session_id="s1", kind="tool_result", content="y" * 30_000))
    event = event_log.get(seq)
    assert event.payload_sha256 is not None
    event_log.payloads.path_for(event.payload_sha256).unlink()
    with pytest.raises(PayloadMissing, match=f"seq {seq}") as info:
        event_log.full_text(event)
    assert info.value.seq == seq


def test_corrupt_payload_is_reported(event_log: EventLog) -> None:
    seq = event_log.append(NewEvent(session_id="s1", kind="tool_result", content="z" * 30_000))
    sha = event_log.get(seq).payload_sha256
    assert sha is not None
    event_log.payloads.path_for(sha).write_text("tampered")
    with pytest.raises(PayloadMissing, match="does not match"):
        event_log.full_text(event_log.get(seq))


def test_events_and_span_read_in_seq_order(event_log: EventLog) -> None:
    seqs = event_log.append_many(_turn(f"turn {i}") for i in range(1200))
    assert [e.seq for e in event_log.events(list(reversed(seqs)))] == seqs
    assert [e.seq for e in event_log.span(seqs[10], seqs[12])] == seqs[10:13]
    assert [e.seq for e in event_log.session_events("s1", after_seq=seqs[-3])] == seqs[-2:]
    with pytest.raises(UsageError, match="no event at seq 99999"):
        event_log.get(99_999)


def test_reopen_keeps_everything_and_migrations_run_once(store_dir: Path) -> None:
    path = store_dir / "history.db"
    with EventLog.open(path) as log:
        log.append(_turn("persisted"))
    with EventLog.open(path, verify=True) as log:
        assert log.count() == 1
        assert len(log.execute("SELECT * FROM _migrations")) == len(MIGRATIONS)


def test_store_without_fts5_records_it(store_dir: Path) -> None:
    with EventLog.open(store_dir / "history.db", fts5=False) as log:
        log.append(_turn("no full text index here"))
        assert not log.has_fts5
    with EventLog.open(store_dir / "history.db") as log:
        assert not log.has_fts5


@pytest.mark.parametrize(
    "content",
    [b"this is not sqlite at all, just text" * 10, b"SQLite format 3\x00" + b"\xff" * 5000],
)
def test_foreign_or_corrupt_file_is_reported_not_replaced(store_dir: Path, content: bytes) -> None:
    path = store_dir / "history.db"
    path.write_bytes(content)
    with pytest.raises(IntegrityError) as info:
        EventLog.open(path)
    assert info.value.exit_code == 3
    assert path.read_bytes() == content


def test_other_sqlite_database_is_not_taken_over(store_dir: Path) -> None:
    path = store_dir / "history.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError, match="not a scrollctx store"):
        EventLog.open(path)


def test_torn_database_page_fails_quick_check(store_dir: Path) -> None:
    path = store_dir / "history.db"
    with EventLog.open(path) as log:
        log.append_many(_turn("padding " * 200) for _ in range(300))
        log.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    data[page * 5 : page * 5 + 200] = b"\x00\x17" * 100  # tear an interior page
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError):
        with EventLog.open(path, verify=True) as log:
            log.count()


def test_empty_session_or_kind_is_refused(event_log: EventLog) -> None:
    with pytest.raises(UsageError, match="session_id"):
        event_log.append(NewEvent(session_id="", kind="x"))
    with pytest.raises(UsageError, match="kind"):
        event_log.append(NewEvent(session_id="s", kind=""))
    assert event_log.count() == 0


# The layout stores had before the writer indexed per batch (a per-row trigger, the log table as
# the FTS content). Written out here because the code that made it is gone.
_OLD_LAYOUT = """
CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE conversation_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, agent_id TEXT,
    run_id TEXT, task_id TEXT, step_index INTEGER, msg_index INTEGER, kind TEXT NOT NULL,
    role TEXT, name TEXT, content TEXT NOT NULL DEFAULT '', prose TEXT NOT NULL DEFAULT '',
    code TEXT NOT NULL DEFAULT '', headline TEXT, label TEXT, tool_call_id TEXT,
    tool_input TEXT, tool_state TEXT, metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL, dedup_key TEXT, payload_sha256 TEXT, payload_size INTEGER,
    searchable INTEGER NOT NULL DEFAULT 1);
CREATE UNIQUE INDEX ch_dedup ON conversation_history(session_id, dedup_key);
CREATE VIRTUAL TABLE conversation_history_fts USING fts5(prose, code, headline,
    content='conversation_history', content_rowid='seq', tokenize='porter unicode61');
CREATE TRIGGER ch_fts_insert AFTER INSERT ON conversation_history WHEN new.searchable
BEGIN
    INSERT INTO conversation_history_fts(rowid, prose, code, headline)
    VALUES (new.seq, new.prose, new.code, COALESCE(new.headline, ''));
END;
CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO _meta VALUES ('fts5', '1');
INSERT INTO _migrations VALUES ('m001_conversation_history', 'then'), ('m002_store_meta', 'then');
INSERT INTO conversation_history(session_id, kind, content, prose, created_at)
VALUES ('old', 'user_message', 'an older kestrel sighting', 'an older kestrel sighting', 'then');
"""


def test_a_store_from_before_batch_indexing_is_upgraded_once(store_dir: Path) -> None:
    path = store_dir / "history.db"
    with sqlite3.connect(path) as old:
        old.executescript(_OLD_LAYOUT)
    with EventLog.open(path) as log:
        log.append(_turn("a newer kestrel"))
        log.append_many([_turn("batch kestrel one"), _turn("batch kestrel two")])
        assert _matches(log, "kestrel") == [1, 2, 3, 4]  # each row once
        _index_matches_the_rows(log)
        assert not log.execute("SELECT 1 FROM sqlite_master WHERE name = 'ch_fts_insert'")
    with EventLog.open(path, verify=True) as log:
        assert len(log.execute("SELECT * FROM _migrations")) == len(MIGRATIONS)
        assert _matches(log, "older") == [1]


def test_a_file_in_the_way_of_the_store_folder_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "store"
    blocker.write_text("not a folder", encoding="utf-8")
    with pytest.raises(StoreError, match="cannot create the store folder") as info:
        EventLog.open(blocker / "history.db")
    assert not isinstance(info.value, IntegrityError)
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_a_folder_where_the_log_file_should_be_is_a_store_error(store_dir: Path) -> None:
    (store_dir / "history.db").mkdir()
    with pytest.raises(StoreError, match="is a folder"):
        EventLog.open(store_dir / "history.db")


def test_a_store_locked_past_the_timeout_is_a_clear_store_error(store_dir: Path) -> None:
    # A brand-new file still in rollback-journal mode, held under an exclusive lock by
    # another connection: switching it to WAL cannot succeed until that lock is released.
    path = store_dir / "history.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="held its lock for over 0.2 s"):
            EventLog.open(path, lock_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
    with EventLog.open(path) as log:  # once released, the same open succeeds
        assert log.count() == 0
    holder.close()
