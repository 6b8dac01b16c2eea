"""Real damage to real store files: flip one byte on disk where a known value is stored."""

from __future__ import annotations

from pathlib import Path


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
