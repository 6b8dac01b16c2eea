"""Cap the number of threads a worker may have, with a ``pids`` cgroup made by the host.

Threads are allowed inside the worker (seccomp lets ``clone`` with ``CLONE_THREAD`` through), and
``RLIMIT_NPROC`` does not bind a uid-0 worker, so without this a cell could start threads until the
machine runs out of process ids (``pid_max`` is often 32,768) and harm every other process. The
host creates one child cgroup per worker under its own ``pids`` cgroup (v1 hierarchy, or v2 when
``pids`` is enabled for children), writes ``pids.max`` and moves the worker in *before* it reads
its boot frame, so every thread it ever starts is counted; past the cap ``clone`` fails with
``EAGAIN`` (Python: ``RuntimeError: can't start new thread``). Where no writable ``pids`` cgroup
exists the cap is reported as missing (a residual risk), never faked.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TaskCap", "cap_tasks", "is_capped"]

_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


class TaskCap:
    """One worker's pids cgroup (or the reason there is none)."""

    def __init__(self, path: Path | None, detail: str) -> None:
        self.path = path
        self.detail = detail

    @property
    def holds(self) -> bool:
        """Whether the worker's thread count is capped."""
        return self.path is not None

    def remove(self) -> None:
        """Remove the (by then empty) cgroup after the worker was reaped."""
        if self.path is not None:
            try:
                self.path.rmdir()
            except OSError:
                pass
            self.path = None


def _own_pids_cgroup() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if "pids" in controllers.split(","):
            candidate = _ROOTS[0] / rel
            if (candidate / "cgroup.procs").exists():
                return candidate
        elif controllers == "":
            for root in _ROOTS[1:]:
                candidate = root / rel
                control = candidate / "cgroup.subtree_control"
                if control.exists() and "pids" in control.read_text().split():
                    return candidate
    return None


def cap_tasks(pid: int, limit: int) -> TaskCap:
    """Put process ``pid`` into a new pids cgroup allowing ``limit`` tasks (threads included)."""
    parent = _own_pids_cgroup()
    if parent is None:
        return TaskCap(None, "threads not capped: no writable pids cgroup on this machine")
    path = parent / f"scroll-worker-{pid}"
    try:
        path.mkdir(exist_ok=True)
        (path / "pids.max").write_text(str(limit))
        (path / "cgroup.procs").write_text(str(pid))
        members = (path / "cgroup.procs").read_text().split()
        if (path / "pids.max").read_text().strip() != str(limit) or str(pid) not in members:
            raise OSError("the pids cgroup did not take")
    except OSError as exc:
        TaskCap(path, "").remove()
        return TaskCap(None, f"threads not capped: {type(exc).__name__}: {exc}")
    return TaskCap(path, f"at most {limit} threads (pids cgroup)")


def is_capped(pid: int) -> bool:
    """Whether ``pid`` sits in a scroll worker cgroup (for tests and the doctor)."""
    try:
        return "scroll-worker-" in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
