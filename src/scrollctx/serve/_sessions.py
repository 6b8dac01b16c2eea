"""Sessions and their kernels: one registry shared by every front door (MCP server, proxy).

A door keeps one :class:`KernelRegistry`. It maps a *session key* to one persistent sandboxed
:class:`~scrollctx.kernel.Kernel` that the door's factory builds through the kernel's public API
(the registry never configures a sandbox, a store or a tool itself) and that starts on the
session's first cell. Keys come from one of two places:

- the door names the session (a stdio connection, an HTTP session id, a proxy conversation):
  :meth:`KernelRegistry.run_cell` with ``create=True`` makes the kernel on first use, and after
  the kernel ended the next cell gets a fresh one whose observation says the namespace was lost;
- the registry mints a handle (:meth:`KernelRegistry.mint`) that the client passes back, for
  transports without sessions (MCP 2026-07-28 over HTTP); a handle that names no live kernel is
  an :class:`~scrollctx.errors.UnknownSession` saying why it ended. A minted handle is a bearer
  capability: it is never given to the factory, never logged, and never shown to anyone but the
  client it was minted for. The factory gets the session's *log name*, a digest of the key.

Invariants:

- one cell at a time per kernel (a ``Kernel`` has one caller): cells of a session queue on its
  lock, cells of different sessions run in parallel, and any thread may call;
- the worker outlives the thread that started it (workers are spawned from the kernel's
  long-lived spawner thread), so a session whose calls arrive on different threads keeps its
  variables;
- a kernel ends in one of four ways, and the reason is kept for the session's next call: the
  door closes its session (the session ended, or its client went away mid-cell), it was idle for
  ``idle_timeout`` seconds, it was the least recently used idle kernel when ``max_kernels``
  were live and another was needed, or the whole registry closed (server shutdown);
- no orphan worker: closing a kernel that is running a cell kills its worker process, and the
  thread running the cell closes the kernel as soon as the cell returns (closing also stops the
  worker the kernel restarts after the kill); :meth:`KernelRegistry.close_all` waits for those
  threads, so when it returns no worker of this registry is left.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

from scrollctx.errors import KernelError, SessionLimit, UnknownSession, UsageError
from scrollctx.kernel import NAMESPACE_LOST, CellResult, Kernel

__all__ = ["KernelRegistry", "log_name"]

KernelFactory = Callable[[str], Kernel]
"""Builds a session's kernel (not started) from the session's log name."""

_ENDED_KEPT = 1024
_CLOSE_WAIT = 30.0


def log_name(prefix: str, key: str) -> str:
    """Return the name a session goes by in the Event Log: ``prefix-<digest of key>``.

    The digest keeps a minted handle (a secret) out of the log, where ``scroll_sql`` could read
    it, while two kernels of one session still share a name.
    """
    return f"{prefix}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}"


@dataclass(slots=True)
class _Entry:
    kernel: Kernel
    lock: threading.Lock
    last_used: float
    users: int = 0
    running: bool = False
    ending: str | None = None
    """Why the kernel must end, once the door or the registry decided so."""


class KernelRegistry:
    """Kernels by session key (see the module docstring for keys, threads and endings).

    Example::

        registry = KernelRegistry(lambda name: Kernel(event_log=log, session_id=name), "mcp")
        registry.run_cell("stdio", "x = 41")
        print(render_observation(registry.run_cell("stdio", "print(x + 1)")))
        registry.close_all()

    Args:
        factory: builds a kernel for a session from its log name (see :func:`log_name`).
        prefix: the log names' prefix (``mcp``, ``proxy``).
        idle_timeout: seconds a kernel may sit without a cell before :meth:`reap` closes it.
        max_kernels: live kernels at most; past it the least recently used idle one is closed.
        clock: the time source of idle accounting (``time.monotonic``).
    """

    def __init__(
        self,
        factory: KernelFactory,
        prefix: str,
        *,
        idle_timeout: float = 900.0,
        max_kernels: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not idle_timeout > 0 or max_kernels < 1:
            raise UsageError(
                f"idle_timeout and max_kernels must be positive ({idle_timeout}, {max_kernels})"
            )
        self.factory, self.prefix = factory, prefix
        self.idle_timeout, self.max_kernels, self.clock = idle_timeout, max_kernels, clock
        self._entries: dict[str, _Entry] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._minted: set[str] = set()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._closed: str | None = None
        self._reaper: threading.Thread | None = None
        self._stop_reaper = threading.Event()

    # -- sessions ----------------------------------------------------------------------------

    def mint(self) -> str:
        """Create a session under a fresh unguessable handle and return the handle."""
        handle = secrets.token_urlsafe(18)
        with self._lock:
            self._check_open()
            evicted = self._make_room()
            self._minted.add(handle)
            self._entries[handle] = self._new_entry(handle)
        if evicted is not None:
            evicted.kernel.close()
        return handle

    def run_cell(
        self, key: str, source: str, *, timeout: float | None = None, create: bool = True
    ) -> CellResult:
        """Run one cell in the session's kernel, from any thread; return its result.

        ``create``: make the kernel when the session has none (a door-named key). With False
        the key must be a handle from :meth:`mint` whose kernel is live, else
        :class:`UnknownSession` says why not (a client names only handles it was given).

        Raises:
            UnknownSession: ``create`` is False and ``key`` names no live kernel.
            SessionLimit: ``max_kernels`` kernels are all in use.
            KernelError: the kernel could not start.
        """
        entry, notice = self._acquire(key, create)
        try:
            with entry.lock:
                with self._lock:
                    if entry.ending is not None:
                        raise _ended(key, entry.ending)
                    entry.running = True
                try:
                    result = entry.kernel.run_cell(source, timeout=timeout)
                finally:
                    self._finish(entry)
        finally:
            self._release(entry)
        if notice is None:
            return result
        said = f"{notice}; {result.kernel_notice}" if result.kernel_notice else notice
        return replace(result, namespace_lost=True, kernel_notice=said)

    def kernel(self, key: str) -> Kernel | None:
        """The session's live kernel (None when it has none), for inspection: its ``pid``."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.kernel if entry is not None else None

    def close(self, key: str, reason: str) -> None:
        """End the session's kernel (any thread); a cell it is running is stopped.

        ``reason`` completes "the kernel was closed because ..." for the session's next call.
        """
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return
            self._end(key, entry, reason)
        self._stop(entry)

    def interrupt(self, key: str) -> bool:
        """Interrupt the cell the session's kernel is running (namespace kept); False if none.

        The worker gets SIGINT, the cell a ``KeyboardInterrupt``; a cell that ignores it runs
        on until its own timeout, when the kernel interrupts and then kills it.
        """
        with self._lock:
            entry = self._entries.get(key)
            pid = entry.kernel.pid if entry is not None and entry.running else None
        if pid is None:
            return False
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return False
        return True

    def close_all(self, reason: str = "the server shut down") -> None:
        """Close every kernel and refuse new ones; return once no worker of ours is left."""
        self._stop_reaper.set()
        with self._lock:
            self._closed = reason
            entries = list(self._entries.items())
            self._entries.clear()
            for key, entry in entries:
                self._end(key, entry, reason)
        for _, entry in entries:
            self._stop(entry)
        with self._settled:
            self._settled.wait_for(
                lambda: not any(e.running for _, e in entries), timeout=_CLOSE_WAIT
            )

    def reap(self) -> list[str]:
        """Close every kernel idle for over ``idle_timeout`` seconds; return their keys."""
        now = self.clock()
        with self._lock:
            idle = [
                (key, entry)
                for key, entry in self._entries.items()
                if entry.users == 0 and now - entry.last_used > self.idle_timeout
            ]
            for key, entry in idle:
                del self._entries[key]
                self._end(key, entry, f"it was idle for over {self.idle_timeout:g} s")
        for _, entry in idle:
            self._stop(entry)
        return [key for key, _ in idle]

    def start_reaper(self, every: float = 30.0) -> None:
        """Call :meth:`reap` every ``every`` seconds on a daemon thread until close_all."""
        if self._reaper is not None:
            return

        def loop() -> None:
            while not self._stop_reaper.wait(every):
                self.reap()

        self._reaper = threading.Thread(target=loop, name=f"{self.prefix}-reaper", daemon=True)
        self._reaper.start()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed is not None:
            raise KernelError(f"no new kernels: {self._closed}")

    def _new_entry(self, key: str) -> _Entry:
        kernel = self.factory(log_name(self.prefix, key))
        return _Entry(kernel, threading.Lock(), self.clock())

    def _acquire(self, key: str, create: bool) -> tuple[_Entry, str | None]:
        evicted = None
        with self._lock:
            self._check_open()
            if not create and key not in self._minted:
                raise _ended(key, None)  # only a minted handle may be named by a client
            entry = self._entries.get(key)
            notice = None
            if entry is None:
                ended = self._ended.get(key)
                if not create or key in self._minted:
                    raise _ended(key, ended)
                evicted = self._make_room()
                entry = self._entries[key] = self._new_entry(key)
                if ended is not None:
                    notice = (
                        f"this session's previous kernel was closed ({ended}); {NAMESPACE_LOST}"
                    )
            entry.users += 1
            entry.last_used = self.clock()
        if evicted is not None:
            evicted.kernel.close()
        return entry, notice

    def _make_room(self) -> _Entry | None:
        """Free a place for one more kernel (lock held); return the evicted entry to close."""
        if len(self._entries) < self.max_kernels:
            return None
        idle = [(e.last_used, k) for k, e in self._entries.items() if e.users == 0]
        if not idle:
            raise SessionLimit(
                f"all {self.max_kernels} kernels are running cells; retry when one finishes "
                "(the server's --max-kernels sets how many may live at once)"
            )
        _, key = min(idle)
        entry = self._entries.pop(key)
        self._end(key, entry, f"{self.max_kernels} kernels were live and it was the least "
                              "recently used one when another session needed a kernel")  # fmt: skip
        return entry  # idle and now unreachable: no cell can start in it

    def _end(self, key: str, entry: _Entry, reason: str) -> None:
        entry.ending = reason
        self._ended[key] = reason
        self._ended.move_to_end(key)
        while len(self._ended) > _ENDED_KEPT:
            ended, _ = self._ended.popitem(last=False)
            self._minted.discard(ended)

    def _stop(self, entry: _Entry) -> None:
        with self._lock:
            running = entry.running
        if not running:
            entry.kernel.close()
            return
        # The cell's thread owns the kernel until run_cell returns: kill the worker process
        # only (the thread sees it die and closes the kernel in _finish). The pid is our child's;
        # only a worker that died on its own in this very instant could have been reaped (and
        # its pid reused) before the signal.
        pid = entry.kernel.pid
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it ended on its own; _finish still closes the kernel

    def _finish(self, entry: _Entry) -> None:
        with self._lock:
            entry.running = False
            entry.last_used = self.clock()
            ending = entry.ending
        if ending is not None:
            entry.kernel.close()
        with self._settled:
            self._settled.notify_all()

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1


def _ended(key: str, reason: str | None) -> UnknownSession:
    if reason is None:
        return UnknownSession(
            "no kernel session has this handle (it was never issued by this server, or the "
            "server restarted); omit `session` to start a new kernel"
        )
    return UnknownSession(
        f"this kernel session has ended: {reason}; its variables are gone. Omit `session` to "
        "start a new kernel",
        reason=reason,
    )
