"""Watch one worker from the host and kill it before it fills the disk or burns CPU unseen.

``RLIMIT_FSIZE`` caps one file, not how many files a cell writes to scratch, and Landlock cannot
count bytes; a thread a cell leaves running keeps using CPU after the cell's timeout no longer
applies. A daemon thread in the host therefore checks, every :data:`POLL_SECONDS` while the
worker lives (between cells too):

- the bytes the worker sent to storage, from ``/proc/<pid>/io`` (``write_bytes`` minus
  ``cancelled_write_bytes``, counted when pages are dirtied, so before they reach the disk; the
  worker can write nowhere but scratch, so this is its scratch writing); over the quota, it is
  killed;
- the free space and free inodes of the scratch file system; below the floor (at most half of
  what was free when the worker started), it is killed, whatever filled the disk (these two
  apply where the worker writes the real folder: without the namespaces layer);
- the files and folders in the worker's scratch tmpfs (with the namespaces layer, whose tmpfs
  caps bytes but not entries, and every entry costs the host's kernel memory): over
  :data:`~scrollctx.kernel._scratch_walk.MAX_ENTRIES`, it is killed;
- while no cell runs (the host says so with :attr:`WorkerWatch.busy`), the CPU time the worker
  uses, from ``/proc/<pid>/stat``: over the idle budget since the last cell ended (threads a cell
  left spinning), it is killed.

The kill is ``SIGKILL`` to the worker's process group; :attr:`WorkerWatch.reason` says why, and
the host puts that in the observation. Overshoot is bounded by what a process does in one poll.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from scrollctx.kernel._scratch_walk import MAX_ENTRIES

__all__ = ["POLL_SECONDS", "WorkerWatch", "cpu_seconds", "written_bytes"]

POLL_SECONDS = 0.05


def _proc_text(pid: int, name: str) -> str | None:
    # One read of a small /proc file: about a quarter of what Path.read_text costs, and the host
    # reads these every poll.
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def written_bytes(pid: int) -> int | None:
    """Bytes process ``pid`` has sent to storage (net of cancelled writes), if the kernel says."""
    text = _proc_text(pid, "io")
    if text is None:
        return None
    lines = text.splitlines()
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    try:
        return int(fields["write_bytes"]) - int(fields["cancelled_write_bytes"])
    except (KeyError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` (all its threads), if the kernel says."""
    stat = _proc_text(pid, "stat")
    if stat is None or ")" not in stat:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (IndexError, ValueError):
        return None


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _free(path: Path) -> tuple[int, int | None]:
    stats = os.statvfs(path)
    inodes = stats.f_favail if stats.f_files else None
    return stats.f_bavail * stats.f_frsize, inodes


class WorkerWatch:
    """Kills a worker (through ``kill``) that writes too much, leaves the disk too full, or
    uses more than ``idle_cpu`` seconds of CPU while no cell runs."""

    def __init__(
        self,
        pid: int,
        scratch: Path | None,
        *,
        quota: int,
        floor: int,
        idle_cpu: float,
        kill: Callable[[], None],
    ) -> None:
        self.pid = pid
        self.idle_cpu = idle_cpu
        self._busy = True  # booting counts as busy: imports and self-tests use CPU
        self._period = 0  # counts busy changes: an idle period's CPU baseline is per period
        self._idle_period = -1
        self._idle_since: float | None = None
        self.scratch = scratch
        self.quota = quota
        self.reason: str | None = None
        self._kill = kill
        self._stop = threading.Event()
        self.entries: Callable[[], int | None] | None = None
        """Counts the entries of the worker's scratch tmpfs (set once the host opened it)."""
        space, inodes = _free(scratch) if scratch is not None else (0, None)
        self.floor = min(floor, space // 2)
        self.inode_floor = None if inodes is None else min(10_000, inodes // 2)
        self._thread = threading.Thread(target=self._watch, name="scroll-worker-disk", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Whether a cell (or the boot) is running; set by the host around each cell."""
        return self._busy

    @busy.setter
    def busy(self, value: bool) -> None:
        # Off the cell's path: the watch takes the CPU time an idle period starts from at its
        # next poll (what the worker uses in that first poll is not counted).
        self._busy = value
        self._period += 1

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
        period = self._period
        if self._busy:
            self._idle_period = -1
        elif self._idle_period != period:
            self._idle_period, self._idle_since = period, cpu_seconds(self.pid)
        elif (idle_since := self._idle_since) is not None:
            used = (cpu_seconds(self.pid) or idle_since) - idle_since
            if used > self.idle_cpu:
                return (
                    f"it used {used:.1f} s of CPU while no cell was running (over the "
                    f"{self.idle_cpu:g} s allowed between cells): a cell left threads running; "
                    "join your threads before the cell ends"
                )
        entries = self.entries() if self.entries is not None else None
        if entries is not None and entries > MAX_ENTRIES:
            return (
                f"its scratch folder holds {entries:,} files and folders, over the "
                f"{MAX_ENTRIES:,} a kernel may have; keep fewer, larger files"
            )
        written = written_bytes(self.pid)
        if written is not None and written > self.quota:
            return (
                f"it wrote {written:,} bytes to its scratch folder, over the {self.quota:,}-byte "
                "quota of one worker; delete what you no longer need and write less"
            )
        if self.scratch is None:
            return None
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
