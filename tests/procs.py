"""Processes as /proc shows them: is a pid running, and which processes descend from one."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()  # fields after the command name: state, ppid, ...


def alive(pid: int | None) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    fields = _stat(pid) if pid is not None else None
    return fields is not None and fields[0] != "Z"


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, their children...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of ``pid`` so far, in clock ticks (0 once it is gone)."""
    fields = _stat(pid)
    return int(fields[11]) + int(fields[12]) if fields else 0


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
