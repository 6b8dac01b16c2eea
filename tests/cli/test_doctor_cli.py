"""``scroll doctor`` and ``scroll stats --verify`` on real damaged stores: exit 3, seqs named."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from damage import flip_byte, store_before_checksums
from scrollctx.cli import run
from scrollctx.log import EventLog, NewEvent

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def store(store_dir: Path) -> Path:
    with EventLog.open(store_dir / "history.db") as log:
        log.append_many(
            [
                NewEvent(session_id="s", kind="user_message", content="first honest row"),
                NewEvent(session_id="s", kind="user_message", content="a KestrelQZ4 sighting"),
                NewEvent(session_id="s", kind="tool_result", content="big;" * 9000 + "TAILQZ"),
            ]
        )
    return store_dir


def _damage(store: Path) -> None:
    flip_byte(store / "history.db", b"KestrelQZ4", offset=2)
    (payload,) = [p for p in (store / "payloads").rglob("*") if p.is_file()]
    flip_byte(payload, b"TAILQZ")


def test_doctor_passes_a_healthy_store(store: Path, capsys: Capture) -> None:
    assert run(["doctor", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"store {store}: ok (3 events, 1 payload files; quick_check: ok)")
    assert "\nsandbox: " in out


def test_doctor_names_every_damaged_seq_and_exits_3(store: Path, capsys: Capture) -> None:
    _damage(store)
    assert run(["doctor", "--store", str(store)]) == 3
    captured = capsys.readouterr()
    assert "DAMAGED" in captured.out
    assert "seq 2: checksum: the row does not match its checksum" in captured.out
    assert "seq 3: payload corrupt:" in captured.out
    assert "2 damaged event(s): seq 2, 3" in captured.err
    assert run(["doctor", "--json", "--store", str(store)]) == 3
    data = json.loads(capsys.readouterr().out)
    assert data["store"]["bad_seqs"] == [2, 3] and data["store"]["ok"] is False
    assert isinstance(data["sandbox"]["strict_holds"], bool)


def test_doctor_full_finds_an_index_that_no_longer_matches_its_table(
    store: Path, capsys: Capture
) -> None:
    # quick_check reads every page but compares no index with its table: this store passed.
    conn = sqlite3.connect(store / "history.db", isolation_level=None)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX ch_session ON "
                 "conversation_history(kind, seq)' WHERE name = 'ch_session'")  # fmt: skip
    conn.close()
    assert run(["doctor", "--store", str(store)]) == 0
    capsys.readouterr()
    assert run(["doctor", "--full", "--json", "--store", str(store)]) == 3
    checked = json.loads(capsys.readouterr().out)["store"]
    assert checked["quick_check"] == ["ok"] and checked["ok"] is False
    assert checked["integrity_check"][0] == "row 1 missing from index ch_session"


def test_doctor_full_on_a_shared_store_says_it_does_not_apply(capsys: Capture) -> None:
    # Ignored, it would pass a check it never ran; said before any connection is tried.
    assert run(["doctor", "--full", "--store", "postgresql://scroll@127.0.0.1:1/none"]) == 2
    assert "--full runs SQLite's integrity_check on a folder's store" in capsys.readouterr().err


def test_stats_verify_checks_the_whole_store(store: Path, capsys: Capture) -> None:
    assert run(["stats", "--verify", "--store", str(store)]) == 0
    assert "ok (3 events, 1 payload files" in capsys.readouterr().out
    _damage(store)
    assert run(["stats", "--store", str(store)]) == 0  # without --verify: counts only
    capsys.readouterr()
    assert run(["stats", "--verify", "--json", "--store", str(store)]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["verify"]["bad_seqs"] == [2, 3]
    assert json.loads(captured.err)["error"]["type"] == "IntegrityError"


def test_reading_a_damaged_row_through_the_cli_exits_3(store: Path, capsys: Capture) -> None:
    _damage(store)
    assert run(["expand", "1-3", "--store", str(store)]) == 3
    assert "seq 2 in" in capsys.readouterr().err
    assert run(["search", "sighting", "--store", str(store)]) == 3
    assert run(["expand", "1", "--store", str(store)]) == 0


def test_the_installed_command_exits_3(store: Path) -> None:
    _damage(store)
    scroll = Path(sys.executable).with_name("scroll")
    done = subprocess.run(
        [str(scroll), "doctor", "--store", str(store)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert "seq 2" in done.stdout and "seq 2, 3" in done.stderr


def test_a_store_from_before_checksums_is_upgraded_by_doctor(
    store_dir: Path, capsys: Capture
) -> None:
    store_before_checksums(store_dir / "history.db")
    assert run(["search", "kestrel", "--store", str(store_dir)]) == 1
    assert f"scroll doctor --upgrade --store {store_dir}" in capsys.readouterr().err
    assert run(["doctor", "--store", str(store_dir)]) == 1  # checking alone never writes
    assert run(["doctor", "--upgrade", "--store", str(store_dir)]) == 0
    assert "ok (2 events" in capsys.readouterr().out
    assert run(["expand", "1-9", "--json", "--store", str(store_dir)]) == 0  # rows verified
    assert [r["content"] for r in json.loads(capsys.readouterr().out)] == ["an older kestrel", ""]
