"""Per-event checksums on real files: a flipped byte on disk is an IntegrityError naming the seq."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from damage import flip_byte, store_before_checksums
from scrollctx.errors import IntegrityError, StoreError, UsageError
from scrollctx.log import CHECKSUM_COLUMNS, EventLog, NewEvent, event_checksum, stored_checksum
from scrollctx.log._schema import MIGRATIONS

# Each field of the damaged row holds a marker that occurs nowhere else in the file (the FTS
# index stores terms lower-cased; a headline keeps the extractive label, a copy, away).
FIELDS = {
    "content": b"QuailXK7",
    "metadata": b"MetaQZ9",
    "tool_call_id": b"CallQZ8",
    "created_at": b"2031-07-09",
    "session_id": b"SessQZ6",
}


def _write_marked_store(path: Path) -> int:
    with EventLog.open(path) as log:
        log.append(NewEvent(session_id="before", kind="user_message", content="an honest row"))
        seq = log.append(
            NewEvent(
                session_id="SessQZ6",
                kind="tool_result",
                role="tool",
                content="the kestrel QuailXK7 was seen",
                headline="h",
                tool_call_id="CallQZ8",
                metadata={"who": "MetaQZ9"},
                created_at="2031-07-09T10:00:00.000000Z",
            )
        )
        log.append(NewEvent(session_id="after", kind="user_message", content="another one"))
    return seq


def _quick_check(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("PRAGMA quick_check")]


def test_every_appended_row_carries_a_checksum_that_verifies(event_log: EventLog) -> None:
    event_log.append_many(
        [
            NewEvent(session_id="s", kind="k", content="x" * 40_000, metadata={"b": 1, "a": [2]}),
            NewEvent(session_id="s", kind="k", tool_input={"q": "é"}, step_index=True),
        ]
    )
    rows = event_log.execute("SELECT * FROM conversation_history ORDER BY seq")
    assert [len(row["checksum"]) for row in rows] == [32, 32]
    assert all(row["checksum"] == stored_checksum(dict(row)) for row in rows)
    assert event_log.get(2).step_index == 1


def test_the_checksum_ignores_json_key_order_and_spacing_so_backends_agree() -> None:
    row = {name: None for name in CHECKSUM_COLUMNS} | {"seq": 7, "searchable": 1}
    as_text = stored_checksum(row | {"metadata": '{"b":1,"a":{"y":2,"x":3}}'})
    as_jsonb = stored_checksum(row | {"metadata": '{"a": {"x": 3, "y": 2}, "b": 1}'})
    parsed = event_checksum(row | {"metadata": {"a": {"x": 3, "y": 2}, "b": 1}})
    assert as_text == as_jsonb == parsed
    assert event_checksum(row | {"searchable": True}) == event_checksum(row)
    assert event_checksum(row | {"seq": 8}) != event_checksum(row)
    assert event_checksum(row | {"content": b""}) != event_checksum(row | {"content": ""})


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_flipped_byte_passes_quick_check_but_is_never_served(store_dir: Path, field: str) -> None:
    path = store_dir / "history.db"
    seq = _write_marked_store(path)
    flip_byte(path, FIELDS[field], offset=2)
    assert _quick_check(path) == ["ok"]  # what SQLite alone would say
    with EventLog.open(path) as log:
        with pytest.raises(IntegrityError, match=f"seq {seq} in .*history.db") as info:
            log.get(seq)
        assert (info.value.seq, info.value.path, info.value.exit_code) == (seq, str(path), 3)
        with pytest.raises(IntegrityError):
            log.span(1, 3)
        assert [e.seq for e in log.events([1, 3])] == [1, 3]  # the other rows still read


def test_a_byte_flipped_to_invalid_utf8_is_named_not_a_decode_error(store_dir: Path) -> None:
    path = store_dir / "history.db"
    seq = _write_marked_store(path)
    flip_byte(path, FIELDS["content"], xor=0x80)
    assert _quick_check(path) == ["ok"]
    with EventLog.open(path) as log:
        with pytest.raises(IntegrityError, match=f"seq {seq} .* does not match") as info:
            log.session_events("SessQZ6")
        assert info.value.seq == seq
        assert log.get(1).content == "an honest row"  # the connection decodes strictly again


def test_a_row_written_around_the_log_has_no_checksum_and_is_refused(event_log: EventLog) -> None:
    with event_log.atomic() as conn:
        conn.execute(
            "INSERT INTO conversation_history(session_id, kind, content, created_at) "
            "VALUES ('s1', 'user_message', 'smuggled', '2024-01-01T00:00:00Z')"
        )
    with pytest.raises(IntegrityError, match="seq 1 .* has no checksum"):
        event_log.get(1)


@pytest.mark.parametrize(
    "field,value",
    [("session_id", 5), ("role", b"user"), ("step_index", "3"), ("msg_index", 1.5)],
)
def test_values_sqlite_would_convert_are_refused_before_anything_is_written(
    event_log: EventLog, field: str, value: object
) -> None:
    fields = {"session_id": "s", "kind": "k", field: value}
    with pytest.raises(UsageError, match=field):
        event_log.append(NewEvent(**fields))  # type: ignore[arg-type]
    assert event_log.count() == 0


def test_the_upgrade_backfills_every_row_and_keeps_the_log_append_only(store_dir: Path) -> None:
    path = store_dir / "history.db"
    store_before_checksums(path)
    with EventLog.open(path) as log:
        events = log.span(1, 99)
        assert [e.content for e in events][-2:] == ["an older kestrel", ""]
        assert events[-1].tool_input == {"q": [1, 2]}
        with pytest.raises(StoreError, match="append-only: UPDATE refused"):
            log.execute("UPDATE conversation_history SET content = 'x'")
        assert len(log.execute("SELECT * FROM _migrations")) == len(MIGRATIONS)


def test_an_upgrade_that_fails_changes_nothing(store_dir: Path) -> None:
    path = store_dir / "history.db"
    store_before_checksums(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER ch_no_update")  # plant a row whose text is not UTF-8
        conn.execute("UPDATE conversation_history SET content = CAST(x'41ff' AS TEXT)")
        conn.execute("CREATE TRIGGER ch_no_update BEFORE UPDATE ON conversation_history "
                     "BEGIN SELECT RAISE(ABORT, 'append-only: UPDATE refused'); END")  # fmt: skip
    with pytest.raises(IntegrityError, match="not a usable Event Log"):
        EventLog.open(path)
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(conversation_history)")]
        triggers = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'conversation_history'"
        )
        tool_input = conn.execute(
            "SELECT tool_input FROM conversation_history WHERE kind = 'tool_call'"
        ).fetchone()[0]
        assert "checksum" not in columns
        assert {row[0] for row in triggers} == {"ch_no_update", "ch_no_delete"}
        assert json.loads(tool_input) == {"q": [1, 2]}
