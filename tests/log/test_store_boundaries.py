"""The Event Log at its edges: dedup keys in one batch, the payload threshold, new folders,
embedding marks, refused reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollctx.errors import StoreError, UsageError
from scrollctx.log import EventLog, Kind, NewEvent


def _event(content: str, key: str | None = None) -> NewEvent:
    return NewEvent(
        session_id="s", kind=Kind.CONVERSATION, role="user", content=content, dedup_key=key
    )


def test_a_dedup_key_repeated_inside_one_batch_is_appended_once(event_log: EventLog) -> None:
    seqs = event_log.append_many([_event("first", "k"), _event("other"), _event("again", "k")])
    assert seqs[0] == seqs[2] and seqs[1] != seqs[0]
    assert event_log.count() == 2
    assert event_log.get(seqs[0]).content == "first"
    assert event_log.append_many([_event("later", "k")]) == [seqs[0]]
    assert event_log.count() == 2


def test_dedup_keys_are_recognised_in_a_batch_of_more_than_500(event_log: EventLog) -> None:
    # The log looks existing keys up 500 at a time: every key of every chunk must be found.
    batch = [_event(f"record {n}", f"key-{n}") for n in range(1201)]
    first = event_log.append_many(batch)
    again = event_log.append_many([_event(f"re-import {n}", f"key-{n}") for n in range(1201)])
    assert again == first and event_log.count() == 1201


def test_content_of_exactly_the_threshold_stays_inline_one_byte_more_is_a_payload(
    event_log: EventLog,
) -> None:
    limit = event_log.payload_threshold
    at, over = event_log.append_many([_event("é" * (limit // 2)), _event("x" * (limit + 1))])
    inline, external = event_log.get(at), event_log.get(over)
    assert len(inline.content.encode("utf-8")) == limit
    assert inline.payload_sha256 is None and inline.content == "é" * (limit // 2)
    assert external.payload_sha256 is not None and external.payload_size == limit + 1
    assert event_log.full_text(external) == "x" * (limit + 1)


def test_a_store_in_a_missing_nested_folder_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "history.db"
    with EventLog.open(path) as log:
        log.append(_event("hello"))
    assert path.is_file()


def test_an_embedding_mark_starts_at_zero_and_only_moves_forward(event_log: EventLog) -> None:
    event_log.append_many([_event("one"), _event("two"), _event("three")])
    assert event_log.embedded_through("m") == 0
    vector = bytes(8)  # two float32 components
    event_log.append_embeddings("m", 2, 2, [(1, 0, vector), (2, 0, vector)])
    assert event_log.embedded_through("m") == 2
    with pytest.raises(UsageError, match="m is already embedded through seq 2; refusing to move"):
        event_log.append_embeddings("m", 2, 2, [])
    event_log.append_embeddings("m", 2, 3, [(3, 0, vector)])
    assert event_log.embedded_through("m") == 3


def test_a_read_the_database_refuses_is_a_store_error_naming_the_file(
    event_log: EventLog,
) -> None:
    with pytest.raises(StoreError, match=f"read on {event_log.path} failed: no such table: nope"):
        event_log.execute("SELECT * FROM nope")
