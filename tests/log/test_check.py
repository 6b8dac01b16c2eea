"""check_store on real damaged files: quick_check, every checksum and every payload, by seq."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from damage import flip_byte
from scrollctx.errors import IntegrityError, StoreError
from scrollctx.log import EventLog, NewEvent, check_store


def _store(folder: Path) -> tuple[Path, list[int], Path]:
    path = folder / "history.db"
    with EventLog.open(path) as log:
        seqs = log.append_many(
            [
                NewEvent(session_id="s", kind="user_message", content="plain row one"),
                NewEvent(session_id="s", kind="user_message", content="the KestrelQZ4 row"),
                NewEvent(session_id="s", kind="tool_result", content="big;" * 9000 + "TAILQZ"),
                NewEvent(session_id="t", kind="tool_result", content="big;" * 9000 + "TAILQZ"),
            ]
        )
        sha = log.get(seqs[2]).payload_sha256
    assert sha is not None
    return path, seqs, log.payloads.path_for(sha)


def test_a_healthy_store_passes_and_the_file_is_untouched(tmp_path: Path) -> None:
    path, seqs, _ = _store(tmp_path)
    before = path.read_bytes()
    report = check_store(path)
    assert report.ok and report.quick_check == ["ok"] and report.damage == []
    assert (report.events, report.payload_files) == (4, 1)
    assert "ok (4 events, 1 payload files" in report.render()
    assert path.read_bytes() == before


def test_every_damaged_row_and_payload_is_named(tmp_path: Path) -> None:
    path, seqs, payload = _store(tmp_path)
    flip_byte(path, b"KestrelQZ4", offset=1, xor=0x80)  # not UTF-8 any more
    flip_byte(payload, b"TAILQZ")
    report = check_store(path)
    assert report.quick_check == ["ok"] and not report.ok
    assert report.bad_seqs == [seqs[1], seqs[2], seqs[3]]  # the payload is shared by two rows
    problems = {(d.seq, d.problem) for d in report.damage}
    assert problems == {(seqs[1], "checksum"), (seqs[2], "payload corrupt"),
                        (seqs[3], "payload corrupt")}  # fmt: skip
    assert f"seq {seqs[1]}: checksum: the row does not match its checksum" in report.render()
    assert str(payload) in report.render()


def test_a_missing_payload_and_a_row_without_checksum_are_named(tmp_path: Path) -> None:
    path, seqs, payload = _store(tmp_path)
    payload.unlink()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO conversation_history(session_id, kind, created_at) VALUES ('x', 'k', 't')"
        )
    report = check_store(path)
    assert {(d.seq, d.problem) for d in report.damage} == {
        (seqs[2], "payload missing"), (seqs[3], "payload missing"), (5, "checksum")
    }  # fmt: skip
    assert report.to_dict()["bad_seqs"] == [seqs[2], seqs[3], 5]


def test_a_torn_page_fails_quick_check(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        log.append_many(NewEvent(session_id="s", kind="k", content="pad " * 300) for _ in range(99))
    data = bytearray(path.read_bytes())
    data[4096 * 5 : 4096 * 5 + 200] = b"\x00\x17" * 100
    path.write_bytes(bytes(data))
    report = check_store(path)
    assert not report.ok and report.quick_check != ["ok"]
    assert "DAMAGED" in report.render()


def test_no_store_or_a_foreign_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no Event Log"):
        check_store(tmp_path / "history.db")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t(x)")
    with pytest.raises(IntegrityError, match="not a scrollctx store"):
        check_store(other)
