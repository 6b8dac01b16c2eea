"""The scratch folder as the worker sees it: a size-limited tmpfs, kept in step with the real one.

In the worker's mount namespace, scratch is a tmpfs of ``Limits.scratch_size`` bytes, so the
kernel itself refuses a write past the quota (``ENOSPC``, ``fallocate`` included), however fast a
cell writes. Users still rely on scratch being a real, kept folder (``scroll run --workspace``
reads their files there; ``<store>/scratch/<session>`` lives across ``scroll exec`` runs), so the
host copies between the two, and only the host:

- when the worker is ready (before any model code), the host opens the tmpfs through
  ``/proc/<pid>/root`` and keeps that descriptor for the worker's life; it then *seeds* it with
  the real folder (a folder holding more than the quota is a :class:`UsageError`);
- before each cell it *pulls* what changed in the real folder since the last sync (a file the
  user added or edited while the kernel runs), after each cell and when the worker ends (killed
  or dead: the held descriptor keeps the tmpfs readable) it *pushes* what the cell changed.

Invariants. Every walk is :func:`~scrollctx.kernel._scratch_walk.walk_folder`'s (through
descriptors, never a symlink, within its bounds); a short one (a folder vanished or could not be
opened mid-walk, or a bound stopped it) has what it saw synced, and no deletion. Only regular files
and folders are copied: a symlink, FIFO or socket a cell makes is never followed or copied, so no
name a cell plants can make the host read or write outside the two folders. A file is written under
a new temporary name of fixed length (``.scroll-sync-`` and 12 random hex digits, made ``O_EXCL``)
in its folder and renamed over the old one (a symlink there is replaced, never followed), so a file
of any name up to ``NAME_MAX`` (255 bytes) is copied. A change is what differs from the manifest of
the last sync (size, mtime, inode, per side); a file both sides changed during one cell keeps the
host's version. A deletion is copied only for files the other side left unchanged. Before writing
the real folder the host checks its free disk, and it never makes that folder hold more than the
quota: the apparent sizes (``st_size``) of its files after each copy are counted against it
(:class:`_Budget`; deletions first, so what they free counts), and a file that does not fit is not
copied, with one note counting them. Copies are dense and each hard link is its own file, so
counting apparent sizes bounds the blocks written. Problems become notes in the cell's observation,
never errors; they share the observation's cap on notes with the worker's own (the kernel applies
it), so a cell cannot grow an observation with them. A problem that lasts (:class:`_Notes`) is
retried at every sync and noted once: a note the sync before gave is not repeated (it is again
once a sync went without it); an event (a cell's write lost to the user's) is noted each time.

Bounds. A sync holds four manifests (both sides' last sync, both sides' walks): at most 4 x 100,000
entries and 4 x 16 MiB of paths, about 140 MB measured for the worst case; a folder past a walk's
bounds cannot seed a kernel, and what lies past its depth or path-length bounds is never copied
(one note counts it). Copies and deletions go in sorted order through a :class:`_Cursor` per side,
which keeps the folders of the last path open, so each folder is opened about once per sync,
whatever its depth.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from scrollctx.errors import UsageError
from scrollctx.kernel._scratch_walk import (
    DIR_FLAGS,
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_PATH,
    Signature,
    file_bytes,
    open_folder,
    signature,
    walk_folder,
)

__all__ = ["ScratchMirror", "ScratchTooLarge", "open_inside"]

_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20

_ABSENT: Literal[False] = False  # what a walk found for a path it did not find


class ScratchTooLarge(UsageError):
    """The scratch folder holds more than the worker's scratch tmpfs may."""


@dataclass
class _Side:
    """One of the two folders: its root descriptor, what the last sync saw there, and the notes
    the last sync to it gave."""

    root: int
    name: str
    seen: dict[str, Signature] = field(default_factory=dict)
    said: set[str] = field(default_factory=set)


@dataclass
class _Notes:
    """What one sync has to say: problems that last until someone acts (a file over the quota,
    folders too deep), said once while they last, and events (a cell's write lost to the
    user's), said every time they happen."""

    lasting: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


def open_inside(pid: int, scratch: str) -> int:
    """Open the worker's scratch folder in its mount namespace, one component at a time.

    ``/proc/<pid>/root`` is the kernel's own link to the worker's root; every component below
    it is opened without following symlinks.
    """
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_folder(root, scratch.strip("/"))
    finally:
        os.close(root)


@dataclass
class _Budget:
    """What the real folder may still take of the quota in one sync: the quota less the
    apparent sizes (``st_size``) of the files there, so a dense copy of a sparse file, or of
    each hard link to one file, never puts more than the quota on the host's disk."""

    left: int
    there: dict[str, Signature]
    """The real folder as this sync's walk found it (a copy replaces the file there)."""
    skipped: int = 0
    skipped_bytes: int = 0

    def take(self, rel: str, st: os.stat_result) -> bool:
        """Count a copy of ``st_size`` bytes over ``rel``; ``False`` (and counted as skipped)
        if it does not fit."""
        old = self.there.get(rel)
        grows = st.st_size - (old[0] if old else 0)
        if grows > self.left:
            self.skipped += 1
            self.skipped_bytes += st.st_size
            return False
        self.left -= grows
        return True


class _Cursor:
    """The folders on the path last opened beneath one side's root, kept open, so a sorted run
    of paths opens each folder once (opening every path's folders from the root made a deep
    tree cost the square of its depth)."""

    def __init__(self, side: _Side) -> None:
        self.side = side
        self._names: list[str] = []
        self._fds: list[int] = []

    def folder(self, rel: str, *, create: bool, itself: bool = False) -> int:
        """Return the folder holding ``rel`` (or ``rel`` itself), opened one component at a
        time without following symlinks, making missing folders when ``create``; the cursor
        keeps it (until a path elsewhere is asked for, or :meth:`close`)."""
        parts = rel.split("/") if itself else rel.split("/")[:-1]
        kept = 0
        while kept < min(len(parts), len(self._names)) and parts[kept] == self._names[kept]:
            kept += 1
        self._close_below(kept)
        for part in parts[kept:]:
            parent = self._fds[-1] if self._fds else self.side.root
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=parent)
                except FileExistsError:
                    pass
            self._fds.append(os.open(part, DIR_FLAGS, dir_fd=parent))
            self._names.append(part)
        return self._fds[-1] if self._fds else self.side.root

    def close(self) -> None:
        """Close every folder the cursor holds."""
        self._close_below(0)

    def _close_below(self, depth: int) -> None:
        while len(self._fds) > depth:
            os.close(self._fds.pop())
            self._names.pop()


def _free(fd: int) -> int:
    stats = os.statvfs(fd)
    return stats.f_bavail * stats.f_frsize


class ScratchMirror:
    """Copies between the worker's scratch tmpfs (``inside``, a descriptor) and the real folder.

    ``quota`` is the tmpfs size; ``floor`` the free bytes kept on the real folder's disk.
    """

    def __init__(self, real: str, inside: int, *, quota: int, floor: int) -> None:
        self.quota = quota
        self.real = _Side(os.open(real, DIR_FLAGS), real)
        self.inside = _Side(inside, "the kernel's scratch")
        self.floor = min(floor, _free(self.real.root) // 2)

    def used_inodes(self) -> int | None:
        """Files and folders in the tmpfs (for the host's watch), if the kernel says."""
        try:
            stats = os.statvfs(self.inside.root)
        except OSError:
            return None
        return stats.f_files - stats.f_ffree if stats.f_files else None

    def seed(self) -> list[str]:
        """Copy the whole real folder into the (empty) tmpfs, before any model code runs."""
        walk = walk_folder(self.real.root)
        total = file_bytes(walk.found)
        if total > self.quota or walk.over:
            what = walk.short if walk.over else f"holds {total:,} bytes"
            raise ScratchTooLarge(
                f"the scratch folder {self.real.name} {what}, more than the kernel's "
                f"{self.quota:,}-byte scratch may hold (Limits.scratch_size, its pages are RAM; "
                f"at most {MAX_ENTRIES:,} files and folders). Use a smaller folder, or raise the "
                "limit: SandboxPolicy(limits=Limits(scratch_size=...))"
            )
        return self.pull()

    def pull(self) -> list[str]:
        """Copy into the tmpfs what changed in the real folder since the last sync."""
        return self._sync(self.real, self.inside, host_wins=False)

    def push(self) -> list[str]:
        """Copy into the real folder what changed in the tmpfs since the last sync."""
        return self._sync(self.inside, self.real, host_wins=True)

    def close(self) -> None:
        """Close both folders (the tmpfs of a dead worker is freed with its last descriptor)."""
        for side in (self.real, self.inside):
            if side.root >= 0:
                os.close(side.root)
                side.root = -1

    def _sync(self, source: _Side, target: _Side, *, host_wins: bool) -> list[str]:
        # Nothing a cell leaves in scratch (a folder vanishing mid-walk, more folders than the
        # host has descriptors) may raise out of run_cell or close: it becomes a note.
        notes = _Notes()
        try:
            self._copy_changes(source, target, notes, host_wins=host_wins)
        except OSError as exc:
            notes.lasting.append(f"the scratch sync to {target.name} stopped: {exc.strerror}")
        # A problem that lasts (a file over the quota, a folder too deep) is retried at every
        # sync but said once, not in every cell's observation, until what it says changes.
        fresh = [note for note in notes.lasting if note not in target.said]
        target.said = set(notes.lasting)
        return notes.events + fresh

    def _copy_changes(
        self, source: _Side, target: _Side, notes: _Notes, *, host_wins: bool
    ) -> None:
        # host_wins: when both changed a file since the last sync, the real folder's stays.
        walk = walk_folder(source.root)
        now = walk.found
        if walk.short:
            notes.lasting.append(
                f"{source.name} {walk.short}; only what the walk saw was synced, and no "
                "deletion was"
            )
        if walk.beyond:
            entries = "entry" if walk.beyond == 1 else "entries"
            notes.lasting.append(
                f"{source.name} holds {walk.beyond:,} {entries} (files or folders, with all "
                f"they hold) deeper than {MAX_DEPTH} folders or with paths longer than "
                f"{MAX_PATH:,} bytes; they were not synced"
            )
        gone = set() if walk.short else set(source.seen) - set(now)
        changed = sorted(rel for rel, sig in now.items() if source.seen.get(rel, _ABSENT) != sig)
        if not (changed or gone):
            return  # nothing to copy or delete: the target side need not be walked
        seen_there = walk_folder(target.root)  # a short walk only keeps more as it is
        there = seen_there.found
        budget = None
        if target is self.real:  # a short walk may miss files: then only what deletions free
            budget = _Budget(0 if seen_there.short else self.quota - file_bytes(there), there)
        removing = _Cursor(target)
        try:  # deletions first, so what they free counts for the copies
            for rel in sorted(gone, reverse=True):  # what a folder holds before the folder
                current = there.get(rel, _ABSENT)
                if _remove(removing, rel, current) and budget is not None and current:
                    budget.left += current[0]
                source.seen.pop(rel, None)
                target.seen.pop(rel, None)
        finally:
            removing.close()
        reading, writing = _Cursor(source), _Cursor(target)
        try:
            self._copy_all(reading, writing, changed, now, there, budget, notes, host_wins)
        finally:
            reading.close()
            writing.close()
        if budget is not None and budget.skipped:
            notes.lasting.append(
                f"{budget.skipped:,} scratch files ({budget.skipped_bytes:,} bytes in all) were "
                f"not copied to {target.name}: it would then hold more than the kernel's "
                f"{self.quota:,}-byte scratch (each file counts at its full size: the copy "
                "fills holes and copies each hard link on its own)"
            )

    def _copy_all(
        self,
        reading: _Cursor,
        writing: _Cursor,
        changed: list[str],
        now: dict[str, Signature],
        there: dict[str, Signature],
        budget: _Budget | None,
        notes: _Notes,
        host_wins: bool,
    ) -> None:
        source, target = reading.side, writing.side
        for rel in changed:
            sig = now[rel]
            changed_there = rel in target.seen and there.get(rel, _ABSENT) != target.seen[rel]
            if changed_there and host_wins:
                notes.events.append(
                    f"scratch file {rel} changed both in the kernel and on the host during the "
                    "cell; the host's version was kept"
                )
                continue
            copied = self._copy(reading, writing, rel, sig, budget, notes)
            if copied is not False:
                source.seen[rel], target.seen[rel] = sig, copied

    def _copy(
        self,
        reading: _Cursor,
        writing: _Cursor,
        rel: str,
        sig: Signature,
        budget: _Budget | None,
        notes: _Notes,
    ) -> Signature | Literal[False]:
        try:
            if sig is None:
                writing.folder(rel, create=True, itself=True)
                return None
            return self._copy_file(reading, writing, rel, budget, notes)
        except OSError as exc:
            notes.lasting.append(
                f"scratch path {rel} was not copied to {writing.side.name}: {exc.strerror}"
            )
            return False

    def _copy_file(
        self,
        reading: _Cursor,
        writing: _Cursor,
        rel: str,
        budget: _Budget | None,
        notes: _Notes,
    ) -> Signature | Literal[False]:
        name = rel.rsplit("/", 1)[-1]
        src = os.open(name, _FILE, dir_fd=reading.folder(rel, create=False))
        try:
            st = os.fstat(src)  # what is copied: _chunks reads no more than st_size bytes
            if not stat.S_ISREG(st.st_mode):
                return False
            dst_dir = writing.folder(rel, create=True)
            target = writing.side
            room = _free(dst_dir) - (self.floor if target is self.real else 0)
            if st.st_size > room:
                notes.lasting.append(
                    f"scratch file {rel} ({st.st_size:,} bytes) was not copied to "
                    f"{target.name}: only {max(room, 0):,} bytes are free there"
                )
                return False
            if budget is not None and not budget.take(rel, st):
                return False
            return _write_over(src, st, name, dst_dir)
        finally:
            os.close(src)


def _remove(removing: _Cursor, rel: str, current: Signature | Literal[False]) -> bool:
    # Only what the other side left as the last sync saw it; a folder only once empty.
    target = removing.side
    if rel not in target.seen or current != target.seen[rel]:
        return False
    try:
        folder = removing.folder(rel, create=False)
    except OSError:
        return False
    name = rel.rsplit("/", 1)[-1]
    try:
        if current is None:
            os.rmdir(name, dir_fd=folder)
        else:
            os.unlink(name, dir_fd=folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTEMPTY):
            raise
        return False
    return True


def _write_over(src: int, st: os.stat_result, name: str, folder: int) -> Signature:
    """Write ``src`` under a temporary name in ``folder``, then rename it over ``name``."""
    temp = _temp_name()
    dst = os.open(temp, _NEW, 0o644, dir_fd=folder)
    try:
        try:
            for chunk in _chunks(src, st.st_size):
                os.write(dst, chunk)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        _unlink_quietly(temp, folder)
        raise
    return signature(os.stat(name, dir_fd=folder, follow_symlinks=False))


def _chunks(fd: int, size: int) -> Iterator[bytes]:
    left = size
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _temp_name() -> str:
    # Fixed-length, so a file whose name is up to NAME_MAX (255 bytes) long can be written
    # beside it; random, so it never names a file already there (it is created O_EXCL).
    return f".scroll-sync-{os.urandom(6).hex()}"


def _unlink_quietly(name: str, folder: int) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass
