"""Walking a scratch folder: every regular file and folder beneath a root, within bounds.

Each folder is opened with ``O_NOFOLLOW`` from its parent's descriptor, depth first, and only the
folders on the path from the root to the one being read are open at once (so many sibling
folders cost no descriptors). A folder that vanishes or cannot be opened mid-walk makes the walk
*short*: the caller syncs what it saw and infers no deletion from it. Symlinks, FIFOs and sockets
are never followed or listed.

Bounds. A walk takes at most :data:`MAX_ENTRIES` files and folders and :data:`MAX_PATH_BYTES`
of relative paths (then it stops, *over*: a folder past either cannot seed a kernel); it leaves
out what lies deeper than :data:`MAX_DEPTH` folders or past :data:`MAX_PATH` bytes of path
(counted in :attr:`Walk.beyond`; no walk takes them, so their absence never reads as a deletion).
So a walk holds at most ``MAX_DEPTH + 1`` descriptors and 16 MiB of paths.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

__all__ = [
    "DIR_FLAGS",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_PATH",
    "MAX_PATH_BYTES",
    "Signature",
    "Walk",
    "file_bytes",
    "open_folder",
    "signature",
    "walk_folder",
]

MAX_ENTRIES = 100_000
"""Files and folders a sync walks at most (more are not copied, and a note says so)."""

MAX_DEPTH = 64
"""The most folders a synced path may lie beneath (deeper ones are not copied; a note says so)."""

MAX_PATH = 4096
"""The longest synced relative path, in bytes (``PATH_MAX``; longer ones are not copied)."""

MAX_PATH_BYTES = 16 * 1024**2
"""The bytes of relative paths one walk holds at most (it stops there, as at MAX_ENTRIES)."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How every folder of a scratch walk or copy is opened: never through a symlink."""

Signature = tuple[int, int, int] | None
"""(size, mtime_ns, inode) of a file; ``None`` for a folder."""


def signature(st: os.stat_result) -> Signature:
    """What a sync compares of an entry: a file's size, mtime and inode; ``None`` for a folder."""
    return None if stat.S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns, st.st_ino)


def file_bytes(found: dict[str, Signature]) -> int:
    """The apparent size of the files a walk found (what the quota counts)."""
    return sum(sig[0] for sig in found.values() if sig is not None)


@dataclass
class Walk:
    """What one walk found: every regular file and folder beneath a root (relative paths), and
    why it saw only part of the tree, if it did (then no deletion may be inferred from it)."""

    found: dict[str, Signature] = field(default_factory=dict)
    short: str | None = None
    over: bool = False
    """Whether a bound stopped it (rather than a folder it could not read)."""
    beyond: int = 0
    """Entries left out for lying deeper than MAX_DEPTH or past MAX_PATH bytes (no walk ever
    takes them, so their absence never reads as a deletion)."""
    held: int = 0
    """The bytes of the relative paths in ``found``."""

    def stop(self, why: str, *, over: bool = False) -> None:
        self.short = self.short or why
        self.over = self.over or over


@dataclass
class _Level:
    """A folder open on the walk's path from the root: the subfolders it has yet to show."""

    fd: int
    prefix: str
    depth: int = 0
    size: int = 0
    """The bytes of ``prefix``."""
    folders: list[str] = field(default_factory=list)


def walk_folder(root: int, limit: int = MAX_ENTRIES) -> Walk:
    """Walk ``root`` depth first, holding open only the folders on the path to the one being
    read (each opened from its parent's descriptor, never through a symlink).

    A folder that cannot be opened or read (it vanished, ``EMFILE``, ``EACCES``) is left out and
    makes the walk short; so does reaching ``limit`` entries, which ends it.
    """
    walk = Walk()
    chain = [_Level(os.dup(root), "")]
    try:
        _read(chain[-1], walk, limit)
        while chain and not walk.over:
            level = chain[-1]
            if not level.folders:
                os.close(chain.pop().fd)
                continue
            name = level.folders.pop()
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=level.fd)
            except OSError as exc:
                walk.stop(f"could not open {level.prefix + name} ({exc.strerror})")
                continue
            size = level.size + len(os.fsencode(name)) + 1
            chain.append(_Level(fd, f"{level.prefix}{name}/", level.depth + 1, size))
            _read(chain[-1], walk, limit)
    finally:
        for level in chain:
            os.close(level.fd)
    return walk


def _read(level: _Level, walk: Walk, limit: int) -> None:
    # One folder's entries into the walk; its subfolders onto the level, to be visited next.
    try:
        with os.scandir(level.fd) as entries:
            for entry in entries:
                if len(walk.found) >= limit:
                    walk.stop(f"holds more than {limit:,} files and folders", over=True)
                    return
                st = entry.stat(follow_symlinks=False)
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    continue  # symlinks, FIFOs, sockets stay where they are
                size = level.size + len(os.fsencode(entry.name))
                if level.depth >= MAX_DEPTH or size > MAX_PATH:
                    walk.beyond += 1  # and, for a folder, what it holds: it is not opened
                    continue
                walk.held += size
                if walk.held > MAX_PATH_BYTES:
                    walk.stop(f"holds more than {MAX_PATH_BYTES:,} bytes of paths", over=True)
                    return
                walk.found[level.prefix + entry.name] = signature(st)
                if stat.S_ISDIR(st.st_mode):
                    level.folders.append(entry.name)
    except OSError as exc:
        walk.stop(f"could not read {level.prefix or 'its top folder'} ({exc.strerror})")


def open_folder(root: int, rel: str) -> int:
    """Open the folder ``rel`` beneath ``root`` one component at a time, never through a
    symlink."""
    fd = os.dup(root)
    try:
        for part in rel.split("/"):
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError:
        os.close(fd)
        raise
    return fd
