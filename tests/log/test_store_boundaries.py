"""The Event Log at its edges: dedup keys in one batch, the payload threshold, new folders,
embedding marks, refused reads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scrollctx.errors import IntegrityError, StoreError, UsageError
from scrollctx.log import EventLog, Kind, NewEvent
from scrollctx.surface import open_surface


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
    # A vector stored twice is refused by the database: a StoreError, and the mark stays.
    with pytest.raises(StoreError, match="append_embeddings on .* failed: UNIQUE constraint"):
        event_log.append_embeddings("m", 2, 4, [(3, 0, vector)])
    assert event_log.embedded_through("m") == 3


def test_a_read_the_database_refuses_is_a_store_error_naming_the_file(
    event_log: EventLog,
) -> None:
    with pytest.raises(StoreError, match=f"read on {event_log.path} failed: no such table: nope"):
        event_log.execute("SELECT * FROM nope")


def test_an_imported_row_needs_its_payload_in_the_store_first(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "source" / "history.db") as source:
        big = source.get(source.append(_event("x" * (source.payload_threshold + 1))))
    assert big.payload_sha256 is not None
    with EventLog.open(tmp_path / "target" / "history.db") as target:
        with pytest.raises(UsageError, match="seq 1: put its payload before importing the row"):
            target.import_events([big])
        assert target.count() == 0
        target.payloads.put(("x" * (source.payload_threshold + 1)).encode("utf-8"))
        target.import_events([big])
        assert target.full_text(target.get(1)) == "x" * (source.payload_threshold + 1)


def test_rows_import_into_a_store_without_full_text_search(tmp_path: Path) -> None:
    with EventLog.open(tmp_path / "source" / "history.db") as source:
        rows = [source.get(s) for s in source.append_many([_event("one"), _event("two")])]
    with EventLog.open(tmp_path / "target" / "history.db", fts5=False) as target:
        target.import_events(rows)
        assert [e.content for e in target.span(1, 2)] == ["one", "two"]


@pytest.mark.parametrize("fts5", [True, False], ids=["fts5", "like"])
def test_ms_search_finds_the_searchable_rows_and_only_them(store_dir: Path, fts5: bool) -> None:
    # Both search paths: the FTS5 index, and the LIKE scan of a store without FTS5.
    with EventLog.open(store_dir / "history.db", fts5=fts5) as log:
        log.append_many(
            [
                _event("the kestrel nests on the tower"),
                NewEvent(
                    session_id="s", kind=Kind.CONVERSATION, content="kestrel", searchable=False
                ),
                _event("a kestrel came back"),
            ]
        )
    with open_surface(store_dir / "history.db") as ms:
        assert sorted(hit["seq"] for hit in ms.search("kestrel")) == [1, 3]


def test_a_store_missing_its_own_tables_opens_read_only_as_an_integrity_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store" / "history.db"
    with EventLog.open(path) as log:
        log.append(_event("kept"))
        with log.atomic() as conn:
            conn.execute("DROP TABLE _meta")
    with pytest.raises(IntegrityError, match="is not a usable Event Log: no such table: _meta"):
        EventLog.open_read_only(path)


def test_a_log_opened_in_one_thread_writes_and_reads_from_another(event_log: EventLog) -> None:
    # One EventLog serves every thread of a process (its own lock serializes them).
    with ThreadPoolExecutor(max_workers=1) as pool:
        seq = pool.submit(event_log.append, _event("from a worker thread")).result()
        assert pool.submit(event_log.get, seq).result().content == "from a worker thread"
    assert event_log.get(seq).content == "from a worker thread"
