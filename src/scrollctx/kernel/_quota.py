"""Watch one worker's disk use from the host and kill it before it can fill the disk.

``RLIMIT_FSIZE`` caps one file, not how many files a cell writes to scratch, and Landlock cannot
count bytes. A daemon thread in the host therefore checks, every :data:`POLL_SECONDS` while the
worker lives (between cells too, for threads a cell left running):

- the bytes the worker sent to storage, from ``/proc/<pid>/io`` (``write_bytes`` minus
  ``cancelled_write_bytes``, counted when pages are dirtied, so before they reach the disk; the
  worker can write nowhere but scratch, so this is its scratch writing); over the quota, it is
  killed;
- the free space and free inodes of the scratch file system; below the floor (at most half of
  what was free when the worker started), it is killed, whatever filled the disk.

The kill is ``SIGKILL`` to the worker's process group; :attr:`DiskWatch.reason` says why, and the
host puts that in the observation. Overshoot is bounded by what a process can write in one poll.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["POLL_SECONDS", "DiskWatch", "written_bytes"]

POLL_SECONDS = 0.05


def written_bytes(pid: int) -> int | None:
    """Bytes process ``pid`` has sent to storage (net of cancelled writes), if the kernel says."""
    try:
        lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    except OSError:
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    try:
        return int(fields["write_bytes"]) - int(fields["cancelled_write_bytes"])
    except (KeyError, ValueError):
        return None


def _free(path: Path) -> tuple[int, int | None]:
    stats = os.statvfs(path)
    inodes = stats.f_favail if stats.f_files else None
    return stats.f_bavail * stats.f_frsize, inodes


class DiskWatch:
    """Kills a worker (through ``kill``) that writes too much or leaves the disk too full."""

    def __init__(
        self,
        pid: int,
        scratch: Path,
        *,
        quota: int,
        floor: int,
        kill: Callable[[], None],
    ) -> None:
        self.pid = pid
        self.scratch = scratch
        self.quota = quota
        self.reason: str | None = None
        self._kill = kill
        self._stop = threading.Event()
        space, inodes = _free(scratch)
        self.floor = min(floor, space // 2)
        self.inode_floor = None if inodes is None else min(10_000, inodes // 2)
        self._thread = threading.Thread(target=self._watch, name="scroll-worker-disk", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (the worker has ended)."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            problem = self.check()
            if problem is not None:
                self.reason = problem
                self._kill()
                return

    def check(self) -> str | None:
        """Return why the worker must be killed now, or ``None``."""
        written = written_bytes(self.pid)
        if written is not None and written > self.quota:
            return (
                f"it wrote {written:,} bytes to its scratch folder, over the {self.quota:,}-byte "
                "quota of one worker; delete what you no longer need and write less"
            )
        try:
            space, inodes = _free(self.scratch)
        except OSError:
            return None
        if space < self.floor:
            return (
                f"the scratch file system is down to {space:,} free bytes, under the "
                f"{self.floor:,}-byte floor the kernel keeps free"
            )
        if inodes is not None and self.inode_floor is not None and inodes < self.inode_floor:
            return f"the scratch file system is down to {inodes:,} free inodes"
        return None
