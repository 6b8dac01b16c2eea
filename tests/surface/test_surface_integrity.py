"""ms checks each full row it serves: a byte flipped on disk is an IntegrityError naming the seq."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from damage import flip_byte
from scrollctx.errors import IntegrityError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import MemorySurface, open_surface

READS: dict[str, Callable[[MemorySurface, int], object]] = {
    "search": lambda ms, seq: ms.search("kestrel"),
    "search broadened": lambda ms, seq: ms.search("kestrel nonexistentword"),
    "expand seq": lambda ms, seq: ms.expand(seq),
    "expand span": lambda ms, seq: ms.expand(1, 3),
    "expand hits": lambda ms, seq: ms.expand([{"seq": seq}]),
    "session": lambda ms, seq: ms.session("birds"),
    "recall_tool": lambda ms, seq: ms.recall_tool("call-7"),
}


def _store(folder: Path) -> tuple[Path, int]:
    path = folder / "history.db"
    with EventLog.open(path) as log:
        log.append(NewEvent(session_id="birds", kind="user_message", content="watch the sky"))
        seq = log.append(
            NewEvent(
                session_id="birds",
                kind="tool_result",
                content="a kestrel QuailXK7 hovered",
                headline="h",
                tool_call_id="call-7",
            )
        )
        log.append(NewEvent(session_id="birds", kind="user_message", content="a kestrel again"))
    return path, seq


@pytest.mark.parametrize("xor", [0x20, 0x80], ids=["valid-utf8", "invalid-utf8"])
@pytest.mark.parametrize("read", sorted(READS))
def test_every_full_row_read_refuses_a_damaged_row(tmp_path: Path, read: str, xor: int) -> None:
    path, seq = _store(tmp_path)
    with open_surface(path) as ms:
        READS[read](ms, seq)  # healthy: no error
    flip_byte(path, b"QuailXK7", offset=3, xor=xor)
    with open_surface(path) as ms:
        with pytest.raises(IntegrityError, match=f"seq {seq} in {path}") as info:
            READS[read](ms, seq)
        assert info.value.seq == seq
        assert [row["seq"] for row in ms.expand([1, 3])] == [1, 3]  # healthy rows still served


def test_a_damaged_full_text_index_is_an_integrity_error_not_a_raw_sqlite_one(
    tmp_path: Path,
) -> None:
    path, _ = _store(tmp_path)
    with sqlite3.connect(path) as conn:  # every index leaf (id 10 is the structure record)
        for rowid, block in conn.execute(
            "SELECT id, block FROM conversation_history_fts_data WHERE id > 10"
        ).fetchall():
            damaged = bytes(b ^ 0x5A if i % 7 == 4 else b for i, b in enumerate(block))
            conn.execute("UPDATE conversation_history_fts_data SET block = ? WHERE id = ?",
                         (damaged, rowid))  # fmt: skip
    conn.close()
    with open_surface(path) as ms:
        with pytest.raises(IntegrityError, match=f"{path} is corrupt .search failed"):
            ms.search("kestrel")
        assert [row["seq"] for row in ms.expand(1, 3)] == [1, 2, 3]  # the rows are intact


def test_rows_keep_their_keys_and_checksums_stay_internal(tmp_path: Path) -> None:
    path, seq = _store(tmp_path)
    with open_surface(path) as ms:
        (row,) = ms.expand(seq)
    assert not {"checksum", "dedup_key", "searchable"} & set(row)
    assert row["content"] == "a kestrel QuailXK7 hovered" and row["tool_call_id"] == "call-7"


def test_a_flipped_payload_byte_is_flagged_with_the_seq_and_file(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        seq = log.append(
            NewEvent(session_id="s", kind="tool_result", content="row;" * 10_000 + "ENDMARK")
        )
        sha = log.get(seq).payload_sha256
        assert sha is not None
        payload = log.payloads.path_for(sha)
    flip_byte(payload, b"ENDMARK", offset=1)
    with open_surface(path) as ms:
        (row,) = ms.expand(seq)
    assert row["payload_missing"] is True and "externalized" in row["content"]
    (note,) = ms.drain_notes()
    assert f"seq {seq}" in note and str(payload) in note and "does not match" in note
