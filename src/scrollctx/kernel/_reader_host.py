"""The host's side of a memory reader: start it, broker calls to it, replace it when it fails.

:class:`MemoryReader` owns one reader process (:mod:`scrollctx.kernel._reader`). A kernel starts
it on the first ``ms`` call (most cells never call ``ms``, and a start beside the worker's would
sit on the kernel's start path); :meth:`MemoryReader.start` returns at once and the first call
waits for the reader's ``ready``, so the reader's sandbox self-test holds before it answers
anything. Calls are then forwarded as bytes: a call's body goes out unchanged under a fresh
request id, and the reply's header is checked (its id, its size) before the body is handed
back, still undecoded. Per call it enforces a deadline (the surface's time budget plus
``grace``; earlier, SIGINT when the caller's own deadline passes), and a reader that misses it,
dies, or breaks the protocol is killed; the call gets an error that says what happened and what
to do, and the next call starts a fresh reader. A reader that cannot be started at all is the
same: an error for the call, and another try on the next. Under the strict profile a reader
whose sandbox layers do not all hold is stopped and every call is refused (fail closed), with
the opt-out named. While it may start a reader it holds an idle connection to the store, so
the store's ``-wal`` and ``-shm`` exist for the reader to open read-only even when no writer
has the store open.

A kernel's reader also takes the far end of its worker's *channel* when it starts (``start``'s
``channel``), and the worker's later calls go over it, past the host. The deadline then cannot
be the host's wait for a reply, so a watch (:class:`_ReaderWatch`, a host thread polling every
:data:`~scrollctx.kernel._quota.POLL_SECONDS`) reads when the reader's running call started from
memory the two share (the *call clock*) and kills a call past budget plus grace, on either
path; it also budgets the reader's CPU while no cell runs, as the worker's watch does the
worker's. A call the channel loses (the reader died, or hung up on what it was sent) comes
through the host, and gets the error that says what became of the reader. A reader replaced
after a failure serves that worker through the host: the channel was made with the worker.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from scrollctx.errors import CellTimeout, ProtocolError, QueryError, UsageError, WorkerCrashed
from scrollctx.kernel._frames import MAX_FRAME, Body, encode_frame, frame_parts
from scrollctx.kernel._namespace import namespace_request
from scrollctx.kernel._policy import SandboxPolicy, SandboxStatus, parse_layers
from scrollctx.kernel._process import WorkerProcess, default_python
from scrollctx.kernel._quota import POLL_SECONDS, cpu_seconds
from scrollctx.kernel._reader import CLOCK
from scrollctx.surface import Budgets
from scrollctx.surface._filters import Binding
from scrollctx.surface._guard import file_uri
from scrollctx.surface._remote import error_reply

__all__ = ["NOT_STARTED", "AheadCounts", "MemoryReader", "ReaderLimits"]

NOT_STARTED = "not started yet: the memory reader starts on the first ms call"
""":attr:`MemoryReader.state` until a call needs the reader."""

_MODULE = "scrollctx.kernel._reader"
_OVERHEAD = 64 * 1024
_SCRATCH_BYTES = 1024**2  # the reader writes no file (RLIMIT_FSIZE 0): its tmpfs stays empty


class AheadCounts(NamedTuple):
    """A reader's calls answered ahead of their request (:mod:`scrollctx.kernel._ahead`)."""

    run: int
    """Calls the host read off a cell's text and the reader ran."""
    used: int
    """Of those, the ones whose request came and got that answer."""
    cut: int
    """Of those, the ones given up after ``ReaderLimits.ahead_seconds``: their request had not
    come."""


@dataclass(frozen=True, slots=True)
class ReaderLimits:
    """What one memory reader may use, beyond the surface's per-call :class:`Budgets`.

    Example: ``Kernel(event_log=log, reader_limits=ReaderLimits(heap=64 * 1024**2))``.
    """

    address_space: int = 1024**3
    """Bytes of address space of the whole reader process (``RLIMIT_AS``)."""
    heap: int | None = 256 * 1024**2
    """Bytes SQLite may allocate (``PRAGMA hard_heap_limit``); None sets no limit."""
    value_bytes: int | None = 16 * 1024**2
    """The largest string or blob a query may build (``SQLITE_LIMIT_LENGTH``); None: SQLite's."""
    reply_bytes: int = 16 * 1024**2
    """The largest reply one call may send back (a larger result is an error saying so)."""
    ahead_seconds: float = 0.05
    """How long the reader runs a cell's first ``ms`` call ahead of its request, read off the
    cell's text (:mod:`scrollctx.kernel._ahead`), before giving up if the request has not come;
    0 turns answering ahead off."""
    grace: float = 2.0
    """Seconds past the time budget after which the host kills a call that has not answered."""
    boot_timeout: float = 15.0
    """Seconds a reader may take to start."""

    def __post_init__(self) -> None:
        sizes = (self.address_space, self.reply_bytes, self.heap or 1, self.value_bytes or 1)
        positive = self.grace > 0 and self.boot_timeout > 0 and self.ahead_seconds >= 0
        if min(sizes) < 1 or not positive:
            raise UsageError(f"reader limits must be positive: {self}")

    def to_wire(self) -> dict[str, Any]:
        """The limits as the reader's boot frame carries them."""
        return {"address_space": self.address_space, "heap": self.heap,
                "value_bytes": self.value_bytes, "reply_bytes": self.reply_bytes,
                "ahead_seconds": self.ahead_seconds}  # fmt: skip


class MemoryReader:
    """A memory reader process over one store, for one binding, restarted when it fails."""

    def __init__(
        self,
        db_path: Path,
        binding: Binding,
        *,
        policy: SandboxPolicy,
        budgets: Budgets | None = None,
        limits: ReaderLimits | None = None,
        python: str | None = None,
        opt_out: str = "",
        on_ready: Callable[[SandboxStatus], None] | None = None,
        max_request: int = MAX_FRAME,
        idle_cpu: float | None = None,
    ) -> None:
        self.db_path = db_path
        self.binding = binding
        self.policy = policy
        self.budgets = budgets or Budgets()
        self.limits = limits or ReaderLimits()
        self.python = python or default_python()
        self.opt_out = opt_out
        """How the caller opts out of a layer, added to a refusal (e.g. the kernel's words)."""
        self.on_ready = on_ready
        """Called with the layers of each reader that reports ready (to log them)."""
        self.state = NOT_STARTED
        """``bound`` once the store is open; before the first call :data:`NOT_STARTED`;
        otherwise why ``ms`` is unavailable."""
        self.status: SandboxStatus | None = None
        """The reader's sandbox layers, from its last ``ready`` (None before the first)."""
        self.restarts = 0
        self.max_request = max_request
        """The largest request body the reader reads (a kernel's limit of one call's
        arguments); a larger frame is refused before its body is read."""
        self.idle_cpu = idle_cpu
        """CPU seconds the reader may use while no cell runs (None: not watched)."""
        self.has_channel = False
        """Whether the running reader serves a worker's direct channel."""
        self._watch: _ReaderWatch | None = None
        self._busy = True
        self._scratch: Path | None = None
        self._process: WorkerProcess | None = None
        self._booted_at = 0.0
        self._ready = False
        self._ids = itertools.count(1)
        self._wal_keeper: sqlite3.Connection | None = None

    @property
    def pid(self) -> int | None:
        """The running reader's process id."""
        return self._process.pid if self._process else None

    def start(self, channel: Callable[[], int | None] | None = None) -> None:
        """Start the reader if none runs (returns at once; :meth:`wait_ready` waits).

        ``channel`` hands over the reader's end of a worker's direct ``ms`` channel, taken
        only if a reader is started now.
        """
        refused = self.status is not None and not self.status.holds  # fail closed, for good
        if self._process is not None or refused:
            return
        try:  # the reader's Landlock rule needs the folder to exist when it starts
            (self.db_path.parent / "payloads").mkdir(exist_ok=True)
        except OSError:
            pass  # a read-only store: the log cannot write payloads there either
        if self._wal_keeper is None:
            self._wal_keeper = _keep_wal_files(self.db_path)
        # Without shared memory for the call clock no watch could bound a call over the channel:
        # the worker's calls then all come through the host.
        fd = channel() if channel is not None and hasattr(os, "memfd_create") else None
        try:
            process, clock = self._spawn(fd)
        except (OSError, WorkerCrashed) as exc:  # a failed spawn costs the call, not the run
            self.state = f"the memory reader failed to start: {exc}"
            return
        boot = {
            "op": "boot",
            "db_path": str(self.db_path),
            "scratch": str(process.scratch),
            "binding": asdict(self.binding),
            "budgets": asdict(self.budgets),
            "limits": self.limits.to_wire(),
            "policy": {**self.policy.to_wire(), "namespaces": process.namespace_facts},
            "max_request": self.max_request,
        }
        self._booted_at = time.monotonic()
        try:
            process.send(encode_frame(0, boot), self._booted_at + self.limits.boot_timeout)
        except (CellTimeout, WorkerCrashed) as exc:
            process.kill()
            if clock is not None:
                clock.close()
            self.state = f"the memory reader failed to start: {exc}"
            return
        self._process, self._ready, self.has_channel = process, False, fd is not None
        self._watch = _ReaderWatch(process, clock, self.budgets.seconds + self.limits.grace,
                                   self.idle_cpu, busy=self._busy)  # fmt: skip
        """Bounds a call over the channel (and every other) and the reader's idle CPU."""

    def _spawn(self, channel: int | None) -> tuple[WorkerProcess, mmap.mmap | None]:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="scroll-reader-"))
        request = namespace_request(self.policy, self.db_path)  # the store's files, read-only
        if request is not None:
            request = replace(request, scratch_size=_SCRATCH_BYTES)
        fds = {} if channel is None else {"ms": channel}
        clock = None
        try:
            if hasattr(os, "memfd_create"):  # Linux
                fds["clock"] = os.memfd_create("scroll-reader-clock", os.MFD_CLOEXEC)
                os.ftruncate(fds["clock"], CLOCK.size)
                clock = mmap.mmap(fds["clock"], CLOCK.size)
        except OSError:
            for fd in fds.values():
                os.close(fd)
            raise
        try:  # from here the process owns the descriptors: it closes them, started or not
            process = WorkerProcess(
                self.python, self._scratch, None, namespaces=request, module=_MODULE, fds=fds
            )
        except BaseException:
            if clock is not None:
                clock.close()
            raise
        process.reader.max_size = self.limits.reply_bytes + _OVERHEAD
        return process, clock

    def set_busy(self, busy: bool) -> None:
        """Tell the watch whether a cell runs (the reader's CPU is budgeted between cells, as
        the worker's is: a thread a cell left could call it over the channel then)."""
        self._busy = busy
        if self._watch is not None:
            self._watch.busy = busy

    def interrupt(self) -> None:
        """Stop the running call, if any (SIGINT: the reader ignores it between calls)."""
        if self._process is not None and self._ready:
            self._process.interrupt()

    def wait_ready(self, channel: Callable[[], int | None] | None = None) -> WorkerProcess | None:
        """Wait for the reader's ``ready`` (starting it if needed); return it if ms works."""
        self.start(channel)
        process = self._process
        if process is None or self._ready:
            return process
        failure = "it did not report ready in time"
        try:
            ready = process.reader.read(self._booted_at + self.limits.boot_timeout, expect=0)
        except (WorkerCrashed, ProtocolError) as exc:
            ready, failure = None, str(exc)
        if ready is None or ready.get("op") != "ready":
            tail = process.output.text(0.5)[-500:]
            self.state = f"the memory reader failed to start ({failure}); its output: {tail!r}"
            self._stop(process)
            return None
        return process if self._accept(process, ready) else None

    def _accept(self, process: WorkerProcess, ready: dict[str, Any]) -> bool:
        try:
            layers = process.accept_ready(ready.get("layers"))
        except (WorkerCrashed, UsageError, OSError) as exc:
            self.state = f"the memory reader failed to start ({exc})"
            self._stop(process)
            return False
        status = SandboxStatus(self.policy.profile, parse_layers(layers), self.policy.required)
        self.status = status
        state = ready.get("ms")
        self.state = state[:500] if isinstance(state, str) else "unknown"
        if self.on_ready is not None:
            self.on_ready(status)
        if not status.holds:
            missing = ", ".join(f"{s.name} ({s.state}: {s.detail})" for s in status.missing)
            self.state = (
                f"the memory reader's sandbox does not hold here: {missing}; the "
                f"{self.policy.profile!r} profile refuses to read the store without it"
                + (f". {self.opt_out}" if self.opt_out else "")
            )
            self._stop(process)
            return False
        self._ready = self.state == "bound"
        if not self._ready:
            self._stop(process)  # nothing to serve: the store did not open
        return self._ready

    @property
    def answers_ahead(self) -> bool:
        """Whether a call read off a cell's text can be answered ahead now: a reader runs,
        serves the worker's channel, and ``ReaderLimits.ahead_seconds`` is not 0."""
        return (
            self._process is not None
            and self._ready
            and self.has_channel
            and bool(self.limits.ahead_seconds)
        )

    def ask_ahead(self, cell: int, request: dict[str, Any]) -> bool:
        """Have the running reader answer ``request`` now, for the first call over the channel
        of the cell sent as request ``cell`` (:mod:`._ahead`); return whether it was sent.
        Never waits, never starts a reader: a guess the pipe does not take whole at once is
        dropped, so the stream is never torn."""
        process = self._process if self.answers_ahead else None
        if process is None:
            return False
        try:
            frame = encode_frame(cell, {"op": "ms_ahead", **request})
        except (TypeError, ValueError, RecursionError):  # e.g. an int literal too long for JSON
            return False  # the worker's own call fails the same way, in the cell
        return process.offer(frame)

    @property
    def ahead_counts(self) -> AheadCounts:
        """The running reader's calls answered ahead, for diagnostics (zeros: none runs)."""
        return self._watch.ahead_counts() if self._watch is not None else AheadCounts(0, 0, 0)

    def forward(
        self,
        body: Body,
        call: Any,
        what: str,
        until: float | None = None,
        channel: Callable[[], int | None] | None = None,
    ) -> Body:
        """Send one call's body; return the reply's body (or an error reply for ``call``).

        ``what`` names the call in messages (``ms.search``); ``until`` is the caller's own
        deadline: past it the call is interrupted, and its reply still awaited for ``grace``.
        ``channel``: as for :meth:`start`.
        """
        process = self.wait_ready(channel)
        if process is None:
            unavailable = RuntimeError(f"ms is not available in this kernel: {self.state}")
            return error_reply(call, unavailable)
        request = next(self._ids)
        budget = self.budgets.seconds + self.limits.grace
        deadline = time.monotonic() + budget
        try:
            process.send(frame_parts(request, body), deadline)
            reply = self._await(process, request, deadline, until)
        except WorkerCrashed:
            if self._watch is not None and self._watch.overdue:
                reply = None  # the watch killed it past its deadline (a call over the channel)
            else:
                return error_reply(call, self._died(process, what))
        except ProtocolError as exc:
            self._stop(process)
            return error_reply(call, QueryError(
                f"the memory reader broke the frame protocol during {what} ({exc}); it was "
                "replaced, try again"))  # fmt: skip
        if reply is None:
            self._stop(process)
            return error_reply(call, QueryError(
                f"{what} did not finish within {budget:g} s (its time budget is "
                f"{self.budgets.seconds:g} s) and the memory reader was killed; narrow the "
                "query (fewer or rarer terms, a seq_range, LIMIT); the next call starts a "
                "fresh reader"))  # fmt: skip
        return reply

    def _await(
        self, process: WorkerProcess, request: int, deadline: float, until: float | None
    ) -> Body | None:
        interrupt_at = until if until is not None and until < deadline else None
        while True:
            wait = deadline if interrupt_at is None else interrupt_at
            reply = process.reader.read_body(wait, expect=request)
            if reply is not None:
                return reply
            if interrupt_at is None:
                return None
            process.interrupt()
            interrupt_at = None
            deadline = min(deadline, time.monotonic() + self.limits.grace)

    def _died(self, process: WorkerProcess, what: str) -> QueryError:
        exit_text = process.exit_text()
        if self._watch is not None and self._watch.reason:
            exit_text += f" by the host, because {self._watch.reason}"
        self._stop(process)
        return QueryError(
            f"the memory reader was killed during {what} ({exit_text}): the query used more "
            f"than {self.limits.address_space // 1024**2:,} MiB or crashed it; narrow it. A "
            "fresh reader answers the next call"
        )

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """The transport of a host-side ``RemoteSurface``: one call, its decoded reply."""
        call = next(self._ids)
        body = json.dumps({"op": "ms", "call": call, **message}, ensure_ascii=True)
        what = f"ms.{str(message.get('method'))[:40]}"
        reply = json.loads(self.forward(body.encode("ascii"), call, what))
        return reply if isinstance(reply, dict) else {}

    def _stop(self, process: WorkerProcess) -> None:
        process.kill()
        if self._process is process:
            self._process, self._ready, self.has_channel = None, False, False
            self.restarts += 1
            self._end_watch()

    def retire(self) -> None:
        """Stop a reader that serves a channel to a worker that is gone: the next call starts
        one for the current worker."""
        if self._process is not None and self.has_channel:
            self._stop(self._process)

    def _end_watch(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def close(self) -> None:
        """Stop the reader and remove its private folder."""
        if self._process is not None:
            self._process.stop()
            self._process = None
        self._end_watch()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if self._wal_keeper is not None:
            self._wal_keeper.close()
            self._wal_keeper = None


def _keep_wal_files(db_path: Path) -> sqlite3.Connection | None:
    """A host connection to the store that makes SQLite create its ``-wal`` and ``-shm`` and
    keeps them while it is open.

    The reader may open only files that exist when it starts, and only to read: it can create
    neither, and the last writer to close the store deletes both (a store ingested and closed
    has none). An idle connection holds no lock a writer or a checkpoint waits for. None when
    the file will not open as a database here (the reader then says why).
    """
    try:
        conn = sqlite3.connect(
            file_uri(db_path, "rw"), uri=True, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error:
        return None
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        conn.close()
        return None
    return conn


class _ReaderWatch:
    """Watches one reader from the host, every :data:`~._quota.POLL_SECONDS`.

    Calls reach the reader through the host (which bounds each one) or straight from the worker
    over its channel, past the host. The reader publishes when its running call started (the
    shared clock); the watch kills a call that runs past ``limit`` seconds, whichever way it
    came, as the host's own deadline does for a call it forwards. While no cell runs, it counts
    the reader's CPU time against ``idle_cpu`` (a thread a cell left running could call it
    over the channel then), as the worker's watch counts the worker's.
    """

    def __init__(
        self,
        process: WorkerProcess,
        clock: mmap.mmap | None,
        limit: float,
        idle_cpu: float | None,
        *,
        busy: bool,
    ) -> None:
        self.busy = busy
        self.overdue = False
        """Whether the watch killed the reader for a call past its deadline."""
        self.reason: str | None = None
        self._process, self._clock, self._limit, self._idle_cpu = process, clock, limit, idle_cpu
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="scroll-reader-watch",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def call_started(self) -> float:
        """When the reader's running call started (0.0: none runs, or the watch has ended)."""
        return self._read_clock()[0]

    def ahead_counts(self) -> AheadCounts:
        """The counts the reader keeps after the call clock's start time."""
        return AheadCounts(*self._read_clock()[1:])

    def _read_clock(self) -> tuple[float, int, int, int]:
        try:
            if self._clock is not None:
                return CLOCK.unpack_from(self._clock)
        except ValueError:  # closed: the watch has ended
            pass
        return 0.0, 0, 0, 0

    def stop(self) -> None:
        """Stop watching (the reader has ended or is being replaced)."""
        self._stop.set()

    def _watch(self) -> None:
        idle_since: float | None = None
        try:
            while not self._stop.wait(POLL_SECONDS):
                started = self.call_started()
                if started and time.monotonic() - started > self._limit:
                    self.overdue = True
                    self._process.signal_kill()
                    return
                if self.busy or self._idle_cpu is None:
                    idle_since = None
                    continue
                used = cpu_seconds(self._process.pid)
                if used is None:
                    continue
                if idle_since is None:
                    idle_since = used
                elif used - idle_since > self._idle_cpu:
                    self.reason = (
                        f"it used {used - idle_since:.1f} s of CPU while no cell was running (over "
                        f"the {self._idle_cpu:g} s allowed): a thread a cell left kept calling ms"
                    )
                    self._process.signal_kill()
                    return
        finally:
            if self._clock is not None:
                self._clock.close()
