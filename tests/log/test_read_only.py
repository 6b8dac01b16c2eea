"""``EventLog.open_read_only``: an inspector's handle on a store that cannot write it."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from store_helpers import turn

from scrollctx.errors import StoreError
from scrollctx.log import EventLog


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_a_read_only_log_reads_and_refuses_every_write(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with EventLog.open(store / "history.db", payload_threshold=64) as log:
        seqs = log.append_many([turn("hello"), turn("x" * 500)])
    before = _digests(store)

    log = EventLog.open_read_only(path=store / "history.db")  # `path` may be given by name
    try:
        assert [e.seq for e in log.session_events("s1")] == seqs
        assert log.full_text(log.get(seqs[1])) == "x" * 500
        big = turn("y" * 5000)  # would be a new payload file: refused before it is written
        for write in (lambda: log.append(big), lambda: log.import_events([log.get(seqs[0])])):
            with pytest.raises(StoreError, match="opened read-only"):
                write()
        with pytest.raises(StoreError, match="opened read-only"), log.atomic():
            pass
        log._conn.execute("SELECT 1")  # the connection itself is read-only too:
        with pytest.raises(sqlite3.OperationalError, match="attempt to write a readonly database"):
            log._conn.execute("INSERT INTO _meta(key, value) VALUES ('x', 'y')")
    finally:
        log.close()
    after = _digests(store)
    assert {k: v for k, v in after.items() if not k.endswith(("-wal", "-shm"))} == {
        k: v for k, v in before.items() if not k.endswith(("-wal", "-shm"))
    }


def test_a_missing_store_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no Event Log at"):
        EventLog.open_read_only(tmp_path / "nothing" / "history.db")
    assert not (tmp_path / "nothing").exists()
