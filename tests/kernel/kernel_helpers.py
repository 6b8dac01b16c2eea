"""Helpers for kernel tests: seeded stores, log snapshots, attacks, host-side tools, sessions."""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.kernel import CellResult, Kernel, MemoryReader, SandboxPolicy
from scrollctx.log import EventLog, Kind, NewEvent

SEED_TEXTS = [
    "We talked about adoption agencies and the paperwork they need.",
    "Melanie painted a lake at sunrise last weekend.",
    "The deploy failed because the migration locked the users table.",
    "Caroline joined an LGBTQ support group in May.",
]


def seed(log: EventLog) -> None:
    """Append a few searchable events."""
    log.append_many(
        NewEvent(session_id="seed", kind=Kind.CONVERSATION, content=text, role="user")
        for text in SEED_TEXTS
    )


@dataclass(frozen=True)
class SandboxVariant:
    """One sandbox configuration; ``landlock_abi`` is ``None`` for "no Landlock"."""

    name: str
    landlock_abi: int | None

    @property
    def has_landlock(self) -> bool:
        """Whether Landlock confines the worker in this variant."""
        return self.landlock_abi is not None

    def policy(self, **changes: Any) -> SandboxPolicy:
        """The policy of this variant, with ``changes`` (e.g. ``limits=``) applied."""
        if self.landlock_abi is None:
            return SandboxPolicy("best-effort", unavailable=frozenset({"landlock"}), **changes)
        return SandboxPolicy(landlock_abi=self.landlock_abi, **changes)


@dataclass(frozen=True)
class LogSnapshot:
    """What must not change when a hostile cell runs: rows, seqs and the files' bytes."""

    count: int
    last_seq: int
    files: dict[str, str]


def snapshot(log: EventLog) -> LogSnapshot:
    """Record the log's row count, last seq and the sha256 of its database files."""
    files = {}
    for suffix in ("", "-wal"):
        path = Path(f"{log.path}{suffix}")
        files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""
    return LogSnapshot(log.count(), log.last_seq(), files)


def assert_log_unchanged(log: EventLog, before: LogSnapshot) -> None:
    """The log is intact (quick_check) and byte-for-byte what it was."""
    log.check()
    assert snapshot(log) == before


@dataclass
class Session:
    """A store with an open writer and a kernel bound to it."""

    log: EventLog
    kernel: Kernel
    root: Path


def lookup(topic: str, limit: int = 3) -> list[str]:
    """Return up to ``limit`` canned facts about ``topic``."""
    return [f"{topic} fact {i}" for i in range(limit)]


def explode(reason: str) -> None:
    """Always fail with ``reason``."""
    raise ValueError(reason)


def big_blob(size: int) -> str:
    """Return a string of ``size`` characters."""
    return "b" * size


def open_session(root: Path, *, start_reader: bool = True, **options: object) -> Session:
    """Create a seeded store under ``root`` and start a kernel on it.

    ``start_reader``: also start the memory reader now (the kernel starts it on the first ``ms``
    call, and logs that start): attacks compare the log before and after a cell, and the
    reader's start event is not the attack's doing.
    """
    log = EventLog.open(root / "store" / "history.db")
    seed(log)
    options.setdefault("tools", [lookup, explode, big_blob])
    kernel = Kernel(event_log=log, session_id="k1", scratch=root / "scratch", **options)  # type: ignore[arg-type]
    status = kernel.start()
    if start_reader and kernel.reader is not None and status.holds:  # a refused kernel calls no ms
        kernel.start_reader()
    return Session(log, kernel, root)


@contextmanager
def channel_in_use(root: Path, **options: object) -> Iterator[tuple[Session, MemoryReader]]:
    """A session whose worker already made its first ``ms`` call (its channel is in use),
    closed afterwards."""
    session = open_session(root, **options)
    try:
        reader = session.kernel.reader
        assert reader is not None and session.kernel.run_cell("ms.has_fts5").ok
        yield session, reader
    finally:
        session.kernel.close()
        session.log.close()


_HOST = """
import sys
from scrollctx.kernel import Kernel, SandboxPolicy

def announce() -> None:
    "Tell the test that the cell runs."
    print("running", flush=True)

policy = SandboxPolicy(sys.argv[2], unavailable=frozenset(sys.argv[3:]))
kernel = Kernel(scratch=sys.argv[1], sandbox=policy, timeout=600, tools=[announce])
kernel.start()
print(kernel.pid, flush=True)
kernel.run_cell(sys.stdin.read())
"""


def assert_worker_dies_with_killed_host(scratch: Path, cell: str, *sandbox: str) -> None:
    """Run a real host process whose kernel runs ``cell``, kill the host with SIGKILL once the
    cell called the host's ``announce()`` tool, and check that its worker ends too.

    ``sandbox``: the profile, then layers to treat as unavailable (default: strict).
    """
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(scratch), *(sandbox or ("strict",))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert host.stdin is not None and host.stdout is not None
    pid = int(host.stdout.readline())
    exited = os.pidfd_open(pid)
    groups = Path(f"/proc/{pid}/cgroup").read_text()
    try:
        host.stdin.write(cell.encode())
        host.stdin.close()
        assert host.stdout.readline() == b"running\n"  # the cell is running
        host.kill()
        host.wait()
        assert select.select([exited], [], [], 30)[0], "the worker outlived its host"
    finally:
        os.close(exited)
        host.stdout.close()
        if os.path.exists(f"/proc/{pid}/status"):
            os.kill(pid, signal.SIGKILL)
        _remove_worker_cgroup(pid, groups)


def _remove_worker_cgroup(pid: int, groups: str) -> None:
    # A host killed outright could not remove its worker's (empty) pids cgroup.
    for line in groups.splitlines():
        if f"scroll-worker-{pid}" in line:
            relative = line.split(":", 2)[2].lstrip("/")
            for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
                with contextlib.suppress(OSError):
                    Path(root, relative).rmdir()


def attack(session: Session, cell: str, **options: float) -> tuple[CellResult, LogSnapshot]:
    """Run a hostile cell; return its result and the log as it was before."""
    before = snapshot(session.log)
    result = session.kernel.run_cell(cell, **options)
    return result, before


def assert_host_unharmed(session: Session, before: LogSnapshot) -> None:
    """The host still runs a cell and the log is byte for byte what it was."""
    assert session.kernel.run_cell("print('host ok')").stdout == "host ok\n"
    assert_log_unchanged(session.log, before)


def assert_only_restart_logged(session: Session, before: LogSnapshot) -> None:
    """The attack cost the worker its life: nothing but the kernel's restart events was added."""
    session.log.check()
    assert [e.seq for e in session.log.span(1, before.last_seq)] == list(
        range(1, before.last_seq + 1)
    )
    added = session.log.span(before.last_seq + 1, session.log.last_seq())
    assert added and all(e.kind == Kind.SYSTEM and e.name == "kernel" for e in added)
    assert session.kernel.run_cell("print('host ok')").stdout == "host ok\n"


WORKER = (
    "import gc, json, os, struct, time\n"
    "from scrollctx.kernel._frames import encode_frame\n"
    "w = next(o for o in gc.get_objects() if type(o).__name__ == 'Worker')\n"
    "def frame(msg, request=None):\n"
    "    return encode_frame(w.cell_id if request is None else request, msg)\n"
)
"""A cell prelude that finds the worker object and builds frames as the worker would."""


def peak_rss() -> int:
    """The test process's peak resident set size so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
