"""Reading the store's SQLite files beside SQLite, without dropping its locks.

SQLite keeps its locks as POSIX record locks on the database file and its ``-shm``, and closing
*any* descriptor of a file drops every such lock the process holds on it, whoever opened that
descriptor. SQLite itself never closes one while a lock stands; code that reads those files
beside it must not either. :func:`read_start` therefore reads through a descriptor of its own
that it never closes: one per file (device and inode) it is asked about, for the life of the
process. It is called only where SQLite cannot answer (explaining a failure), so they are few.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["read_start"]

_held: dict[tuple[int, int], int] = {}
_lock = threading.Lock()


def read_start(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path``, read without ever closing a descriptor of it.

    Raises:
        OSError: the file cannot be found or read.
    """
    with _lock:
        found = os.stat(path)
        held = _held.get((found.st_dev, found.st_ino))
        if held is None:
            held = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            opened = os.fstat(held)  # the file itself, should the path have moved meanwhile
            _held[(opened.st_dev, opened.st_ino)] = held
        return os.pread(held, size, 0)
