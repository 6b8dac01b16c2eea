"""Real damage to real store files (a byte flipped on disk), and a store from before checksums."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from scrollctx.log import EventLog, NewEvent


def flip_byte(path: Path, marker: bytes, *, offset: int = 0, xor: int = 0x20) -> int:
    """Flip one byte in every occurrence of ``marker`` in ``path``; return how many there were.

    Indexes hold copies of their columns (``created_at``, ``session_id``, ``tool_call_id``):
    damaging each copy alike keeps the table and its indexes consistent, which is exactly the
    damage ``quick_check`` cannot see. The store must be closed (its WAL checkpointed into the
    file) so the row's bytes are where this looks. ``xor=0x20`` flips an ASCII letter's case
    (the text stays valid UTF-8); ``xor=0x80`` makes it an invalid UTF-8 byte.
    """
    data = bytearray(path.read_bytes())
    found = 0
    start = data.find(marker)
    while start >= 0:
        data[start + offset] ^= xor
        found += 1
        start = data.find(marker, start + 1)
    if not found:
        raise AssertionError(f"{marker!r} does not occur in {path}")
    path.write_bytes(bytes(data))
    return found


_BEFORE_CHECKSUMS = """
INSERT INTO conversation_history(session_id, kind, content, metadata, tool_input, created_at)
VALUES ('old', 'user_message', 'an older kestrel', '{"date":"2024-01-01"}', NULL, 't1'),
       ('old', 'tool_call', '', '{}', '{"q":[1,2]}', 't2');
"""


def store_before_checksums(path: Path) -> None:
    """A store at m003, the last schema without checksums, holding two rows."""
    with EventLog.open(path) as log:
        log.append(NewEvent(session_id="seed", kind="k"))  # creates everything, then strip it
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER ch_no_update")
        conn.execute("DROP TRIGGER ch_no_delete")
        conn.execute("DELETE FROM conversation_history_fts")
        conn.execute("DELETE FROM conversation_history")
        conn.execute("ALTER TABLE conversation_history DROP COLUMN checksum")
        conn.execute("DELETE FROM _migrations WHERE name = 'm004_event_checksums'")
        conn.executescript(_BEFORE_CHECKSUMS)
        for action in ("UPDATE", "DELETE"):
            conn.execute(
                f"CREATE TRIGGER ch_no_{action.lower()} BEFORE {action} ON conversation_history "
                f"BEGIN SELECT RAISE(ABORT, 'append-only: {action} refused'); END"
            )


def fill_disk(disk: Path) -> Path:
    """Write a filler file until the disk refuses more; return it (delete it to free space)."""
    filler = disk / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler
