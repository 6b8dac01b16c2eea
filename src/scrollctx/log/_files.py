"""Reading the store's SQLite files beside SQLite, without dropping its locks.

SQLite keeps its locks as POSIX record locks on the database file and its ``-shm``, and closing
*any* descriptor of a file drops every such lock the process holds on it, whoever opened that
descriptor. SQLite itself never closes one while a lock stands; code that reads those files
beside it must not either. :func:`read_start` reads through a descriptor the process already
holds on the file (SQLite's), and opens (and closes) its own only when there is none, so there
is no lock to lose.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["read_start"]


def read_start(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path``, read without closing a descriptor of it.

    Raises:
        OSError: the file cannot be found or read.
    """
    found = os.stat(path)
    for name in os.listdir("/proc/self/fd"):
        try:
            held = os.stat(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, or one closed meanwhile
            continue
        if (held.st_dev, held.st_ino) == (found.st_dev, found.st_ino):
            return os.pread(int(name), size, 0)
    with open(path, "rb") as handle:
        return handle.read(size)
