"""Failures of the store's files, translated into errors that say what happened and what to do.

SQLite and the operating system report a full disk, a damaged file or a write-ahead log deleted
under a running store as bare codes ("database or disk is full", "disk I/O error", "file is not
a database"). Every writer and reader of the store sends its failures through
:func:`store_error` (SQLite) or :func:`payload_write_error` (payload files), so the message
names the file, says whether anything committed is at risk, and gives the next step.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from pathlib import Path

from scrollctx.errors import IntegrityError, StoreError
from scrollctx.log._files import read_start

__all__ = [
    "deleted_wal",
    "file_identity",
    "SQLITE_IOERR",
    "known_failure",
    "payload_write_error",
    "primary_code",
    "store_error",
    "wal_shortfall",
]

_SQLITE_CORRUPT = 11
_SQLITE_FULL = 13
_SQLITE_NOTADB = 26
SQLITE_IOERR = 10
"""SQLite's primary result code for an I/O error (a short read included)."""
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_NEARLY_FULL = 256 * 1024  # bytes free below which an I/O error is taken for a full disk
# The wal-index header at the start of the -shm file (sqlite.org/walformat.html): the page size
# is a 16-bit field at byte 14 and mxFrame, the last valid frame of the WAL, a 32-bit field at
# byte 16, both in the machine's byte order. A WAL holds a 32-byte header, then frames of a
# 24-byte header plus one page.
_SHM_PAGE_SIZE, _SHM_MAX_FRAME = slice(14, 16), slice(16, 20)
_WAL_HEADER, _FRAME_HEADER = 32, 24


def store_error(path: Path, action: str, exc: sqlite3.Error) -> StoreError:
    """Translate a SQLite failure on the store at ``path`` during ``action`` (e.g. "append")."""
    return known_failure(path, action, exc) or StoreError(f"{action} on {path} failed: {exc}")


def known_failure(path: Path, action: str, exc: sqlite3.Error) -> StoreError | None:
    """Return the error for a full disk, a deleted ``-wal`` or a corrupt file; else None."""
    code = primary_code(exc)
    # SQLite reports a full disk as SQLITE_FULL when a page cannot be written, but as a plain
    # I/O error when growing its shared-memory index fails: ask the file system which it was.
    if code == _SQLITE_FULL or (code == SQLITE_IOERR and _disk_is_full(path)):
        return StoreError(
            f"{action} on {path} failed: the disk holding it is full ({exc}). Nothing of this "
            f"{action} was written; everything committed before it is kept. Free space on that "
            "disk and retry",
        )
    if code in (SQLITE_IOERR, _SQLITE_NOTADB, _SQLITE_CORRUPT):
        missing = deleted_wal(path)
        if missing:
            return StoreError(f"{action} on {path} failed ({exc}): {missing}")
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return IntegrityError(f"{path} is corrupt ({action} failed: {exc})", path=str(path))
    return None


def primary_code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code of ``exc`` (its extended code's low byte; 0 if none)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def _disk_is_full(path: Path) -> bool:
    try:
        found = os.statvfs(path.parent)
    except OSError:
        return False
    return found.f_bavail * found.f_frsize < _NEARLY_FULL


def wal_shortfall(path: Path) -> int:
    """Pages of recent commits the shared index (``-shm``) counts that the ``-wal`` is too short
    to hold: the ``-wal`` was deleted (SQLite recreates an empty one for each new connection)
    or cut short in place. 0 when it holds them all, or when there is no index to ask."""
    wal = Path(f"{path}-wal")
    try:
        header = read_start(Path(f"{path}-shm"), 20)  # never closes SQLite's locks away
        wal_size = wal.stat().st_size if wal.exists() else 0
    except OSError:
        return 0
    if len(header) < 20:
        return 0
    page_size = int.from_bytes(header[_SHM_PAGE_SIZE], sys.byteorder)
    page_size = 65536 if page_size in (0, 1) else page_size  # 16 bits: 65536 is written as 1
    frames = int.from_bytes(header[_SHM_MAX_FRAME], sys.byteorder)
    needed = _WAL_HEADER + frames * (_FRAME_HEADER + page_size) if frames else 0
    return frames if wal_size < needed else 0


def deleted_wal(path: Path) -> str | None:
    """Explain a write-ahead log that was deleted (or cut short) while the store was in use, if
    that is so."""
    frames = wal_shortfall(path)
    if not frames:
        return None
    wal = f"{path.name}-wal"
    return (
        f"{wal} was deleted or cut short while the store was in use (SQLite recreates an empty "
        f"one). The {frames} pages written since the last checkpoint -- recent commits -- are "
        "not in it: if it was deleted, the process that wrote them still holds the old file "
        f"open, and a scrollctx writer copies them into {path.name} on its next write or when it "
        "closes, and then this works again. If that process was killed, or the file was cut "
        "short, those commits are lost. Next step: let the writer write or close, then retry; "
        "never delete or truncate the -wal or -shm of a store in use"
    )


def payload_write_error(root: Path, size: int, exc: OSError) -> StoreError:
    """Translate a failure to write a payload file under ``root``."""
    if exc.errno in _DISK_FULL:
        return StoreError(
            f"cannot write a payload of {size} bytes into {root}: the disk is full "
            f"({exc.strerror}). Nothing of this append was written; everything committed "
            "before it is kept. Free space on that disk and retry"
        )
    return StoreError(
        f"cannot write a payload into {root}: {exc.strerror or exc}; check that the folder is "
        "writable"
    )


def file_identity(path: Path) -> tuple[int, int] | None:
    """Return (device, inode) of ``path``, or None when it does not exist."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino
