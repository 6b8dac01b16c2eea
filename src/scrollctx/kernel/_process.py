"""One worker process as the host sees it: spawn, send, receive, interrupt, kill.

The worker is started as ``[python, "-I", "-m", "scrollctx.kernel._worker", ...]`` (the memory
reader the same way, as ``scrollctx.kernel._reader``) with a
scrubbed environment (no API keys, ``HOME`` and ``TMPDIR`` in scratch), ``cwd`` = scratch, its own
session, stdin from ``/dev/null``, and the control pipes passed by ``pass_fds``. Its stdout and
stderr (C code, faulthandler) go to one pipe drained by a thread that keeps only the last few KiB,
so a flood can neither block the worker nor grow the host; that tail is untrusted text, shown only
to explain a crash. Writes to the worker never block past a deadline.

A worker started with ``channel=True`` also gets one end of a socket pair (``--fd-ms``): the host
keeps the other until the memory reader started for that worker takes it (``ms`` then goes
straight from the worker to the reader); a reader gets its descriptors the same way (``fds``),
and the host keeps no copy of any descriptor it passed.

Every worker is started from one long-lived daemon thread (:class:`_Spawner`), whatever thread
asks: the worker's ``PR_SET_PDEATHSIG`` fires when the *thread* that forked it ends, and callers
such as the MCP server start kernels from pool threads that come and go.
"""

from __future__ import annotations

import collections
import errno
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from scrollctx.errors import CellTimeout, WorkerCrashed
from scrollctx.kernel._frames import Frame, FrameReader, encode_frame, write_frame_by
from scrollctx.kernel._namespace import (
    NamespaceRequest,
    bwrap_path,
    foreign_namespaces,
    host_namespaces,
    launch_problem,
    read_child_pid,
    sandbox_command,
    worker_reads,
)
from scrollctx.kernel._policy import Limits
from scrollctx.kernel._quota import WorkerWatch
from scrollctx.kernel._scratch import ScratchMirror, open_inside
from scrollctx.kernel._scratch_walk import MAX_ENTRIES
from scrollctx.kernel._tasks import TaskCap, cap_tasks

__all__ = ["WorkerProcess", "default_python", "describe_exit", "worker_environment"]

_TAIL_BYTES = 8192
_INFO_SECONDS = 30.0
_T = TypeVar("_T")


class _Spawner:
    """Runs process starts on one daemon thread that lives as long as the host process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._owner = 0

    def run(self, start: Callable[[], _T]) -> _T:
        """Call ``start`` on the spawner thread and return (or raise) what it did."""
        future: Future[_T] = Future()
        with self._lock:
            if self._thread is None or self._owner != os.getpid():  # none yet, or we forked
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._jobs,), name="scroll-spawner", daemon=True
                )
                self._owner = os.getpid()
                self._thread.start()
            self._jobs.put((start, future))
        return future.result()

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            start, future = jobs.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
                future.set_exception(exc)


_spawner = _Spawner()


def worker_environment(scratch: Path) -> dict[str, str]:
    """Return the whole environment of a worker: nothing from the host's is inherited."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def describe_exit(code: int | None) -> str:
    """Say how a process ended, e.g. ``killed by SIGSEGV`` or ``exit code 3``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _OutputTail:
    """Drains one pipe in a daemon thread, keeping the last bytes only."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._drain, name="scroll-worker-output", daemon=True
        )
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                with self._lock:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    while self._size - len(self._chunks[0]) >= _TAIL_BYTES:
                        self._size -= len(self._chunks.popleft())
        finally:
            os.close(self._fd)

    def text(self, wait: float = 0.0) -> str:
        """Return the kept tail as text (after waiting up to ``wait`` s for the pipe to end)."""
        self._thread.join(wait)
        with self._lock:
            data = b"".join(self._chunks)[-_TAIL_BYTES:]
        return data.decode("utf-8", "replace")


class WorkerProcess:
    """A running worker and its two control pipes.

    With ``namespaces`` (a :class:`NamespaceRequest`), the worker is started through bubblewrap
    in namespaces of its own where this machine allows it; :attr:`namespace_problem` says why
    not otherwise. Either way :attr:`pid` is the worker itself as the host sees it: the host
    signals, watches and caps that process (under bwrap, bwrap's child, pid 1 of its namespace).
    """

    def __init__(
        self,
        python: str,
        scratch: Path,
        limits: Limits | None = None,
        *,
        namespaces: NamespaceRequest | None = None,
        module: str = "scrollctx.kernel._worker",
        fds: Mapping[str, int] | None = None,
        channel: bool = False,
    ) -> None:
        # ``fds`` (name -> descriptor, passed as ``--fd-NAME``) become the process's: the host
        # closes its copies right after the spawn, whether it started or not.
        self.namespace_problem = launch_problem(python) if namespaces is not None else None
        self.namespaced = namespaces is not None and self.namespace_problem is None
        to_read, self._to_worker = os.pipe()
        self._from_worker, from_write = os.pipe()
        out_read, out_write = os.pipe()
        info_read, info_write = os.pipe() if self.namespaced else (-1, -1)
        extra = dict(fds or {})
        self.channel: int | None = None
        """The host's copy of the far end of the worker's ``ms`` channel, until the memory
        reader started for this worker takes it (:meth:`take_channel`)."""
        if channel:
            near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            extra["ms"], self.channel = near.detach(), far.detach()
        argv = [python, "-I", "-m", module,
                "--fd-in", str(to_read), "--fd-out", str(from_write)]  # fmt: skip
        for name, fd in extra.items():
            argv += [f"--fd-{name}", str(fd)]
        if namespaces is not None and self.namespaced:
            reads = worker_reads(python, namespaces.store_files)
            argv = sandbox_command(
                bwrap_path(),
                argv,
                reads=reads,
                scratch=str(scratch),
                scratch_size=namespaces.scratch_size,
                info_fd=info_write,
            )
        passed = (to_read, from_write, *extra.values())
        passed += (info_write,) if self.namespaced else ()
        try:
            self.proc = _spawner.run(
                lambda: subprocess.Popen(
                    argv,
                    pass_fds=passed,
                    stdin=subprocess.DEVNULL,
                    stdout=out_write,
                    stderr=out_write,
                    env=worker_environment(scratch),
                    cwd=scratch,
                    start_new_session=True,
                    close_fds=True,
                )
            )
        except OSError:
            for fd in (self._to_worker, self._from_worker, out_read, info_read, self.channel or -1):
                if fd >= 0:
                    os.close(fd)
            raise
        finally:
            # The host keeps none of what it passed (a reader's channel end and clock are
            # passed on here and held only by the reader from now on).
            for fd in (to_read, from_write, out_write, info_write, *extra.values()):
                if fd >= 0:
                    os.close(fd)
        os.set_blocking(self._to_worker, False)
        self.reader = FrameReader(self._from_worker)
        self.output = _OutputTail(out_read)
        self.closed = False
        self.scratch, self.request = scratch, namespaces
        self.mirror: ScratchMirror | None = None
        self._notes: list[str] = []
        self._pid, self._pidfd = self.proc.pid, None
        self.tasks = TaskCap(None, "threads not capped: the worker has not started")
        self.watch: WorkerWatch | None = None
        if self.namespaced:
            self._pid, self._pidfd = self._find_worker(info_read)
        # Before the boot frame is sent, so every thread the worker ever starts is counted.
        self.tasks = (
            cap_tasks(self._pid, limits.threads)
            if limits is not None
            else TaskCap(None, "threads not capped: the profile applies no limits")
        )
        self.watch = (
            WorkerWatch(
                self._pid,
                None if self.namespaced else scratch,  # a tmpfs caps what the worker writes
                quota=limits.scratch_writes,
                floor=limits.disk_floor,
                idle_cpu=limits.idle_cpu,
                kill=lambda: self._signal(signal.SIGKILL, group=True),
            )
            if limits is not None
            else None
        )

    def _find_worker(self, info_read: int) -> tuple[int, int]:
        # bwrap reports its child's pid (the worker: --as-pid-1) before letting it run.
        try:
            pid = read_child_pid(info_read, time.monotonic() + _INFO_SECONDS)
            pidfd = os.pidfd_open(pid) if pid is not None else None
        except OSError:
            pid = pidfd = None
        finally:
            os.close(info_read)
        if pid is None or pidfd is None:
            self.kill()
            raise WorkerCrashed(
                f"the kernel worker failed to start: bwrap reported no worker "
                f"({self.exit_text()}); its output ended with: {self.output.text(0.5)[-1500:]!r}"
            )
        return pid, pidfd

    @property
    def pid(self) -> int:
        """The worker's process id, as the host sees it."""
        return self._pid

    @property
    def namespace_facts(self) -> dict[str, int] | None:
        """What the worker's namespaces self-test compares against: the host's own ids."""
        return host_namespaces() if self.namespaced else None

    def accept_ready(self, report: Any) -> Any:
        """Take the worker's ready report, before any model code runs; return its layers.

        The host has the last word on ``namespaces``: it knows whether it started the worker in
        them and checks from outside that they are not its own (the worker's self-test can only
        make the verdict stricter). In namespaces, it then opens the scratch tmpfs and seeds it
        from the real folder.

        Raises:
            ScratchTooLarge: the real scratch folder holds more than the tmpfs may.
        """
        if self.namespaced and self.request is not None:
            inside = open_inside(self._pid, str(self.scratch))
            if not self.is_alive():  # the pid might name another process by now
                os.close(inside)
                raise WorkerCrashed(f"the kernel worker ended at start ({self.exit_text()})")
            self.mirror = ScratchMirror(
                str(self.scratch),
                inside,
                quota=self.request.scratch_size,
                floor=self.request.disk_floor,
            )
            if self.watch is not None:
                self.watch.entries = self.mirror.used_inodes
            self._notes += self.mirror.seed()
        if not isinstance(report, dict) or (self.namespace_problem is None and not self.namespaced):
            return report
        report = dict(report)
        if self.namespace_problem is not None:
            report["namespaces"] = {"state": "unavailable", "detail": self.namespace_problem}
        elif (problem := foreign_namespaces(self._pid)) is not None:
            report["namespaces"] = {"state": "failed", "detail": f"host check: {problem}"}
        return report

    def limits_detail(self) -> str:
        """What the host enforces on this worker from outside, for the rlimits layer's detail."""
        watch = self.watch
        if watch is None:
            return self.tasks.detail
        if self.namespaced and self.request is not None:
            scratch = (
                f"scratch: a {self.request.scratch_size // 1024**2:,} MiB tmpfs, at most "
                f"{MAX_ENTRIES:,} entries"
            )
        else:
            scratch = (
                f"scratch writes (quota {watch.quota // 1024**2:,} MiB, "
                f"{watch.floor // 1024**2:,} MiB kept free)"
            )
        return (
            f"{self.tasks.detail}; watched by the host: {scratch}, CPU between cells "
            f"({watch.idle_cpu:g} s)"
        )

    def begin_cell(self) -> None:
        """Copy into the worker's scratch what changed in the real folder since the last cell."""
        if self.mirror is not None:
            self._notes += self.mirror.pull()

    def end_cell(self) -> list[str]:
        """Copy back what the cell changed in scratch; return the problems of every sync since
        the last cell (untrusted text: the names are the cell's, so the caller caps them)."""
        if self.mirror is not None:
            self._notes += self.mirror.push()
        notes, self._notes = self._notes, []
        return notes

    def is_alive(self) -> bool:
        """Whether the worker is still running."""
        if self._pidfd is not None and select.select([self._pidfd], [], [], 0)[0]:
            return False  # a pidfd turns readable when its process ends (bwrap may lag)
        return self.proc.poll() is None

    def send(self, message: dict[str, Any] | bytes | Frame, deadline: float) -> None:
        """Write one frame; raise :class:`CellTimeout` if the worker does not take it in time."""
        frame = encode_frame(0, message) if isinstance(message, dict) else message
        try:
            taken = write_frame_by(self._to_worker, frame, deadline)
        except BrokenPipeError as exc:
            raise WorkerCrashed(f"the worker is gone ({self.exit_text()})") from exc
        if not taken:
            raise CellTimeout("the worker stopped reading its control pipe")

    def offer(self, frame: bytes) -> bool:
        """Write a small frame only if the pipe takes it whole at once; never wait. A frame of
        at most ``PIPE_BUF`` bytes is written whole or not at all, so one not taken leaves the
        stream intact."""
        if len(frame) > select.PIPE_BUF:
            return False
        try:
            return os.write(self._to_worker, frame) == len(frame)
        except OSError:  # full (BlockingIOError) or gone (BrokenPipeError): dropped
            return False

    def set_busy(self, busy: bool) -> None:
        """Tell the watch whether a cell runs (idle CPU is budgeted only between cells)."""
        if self.watch is not None:
            self.watch.busy = busy

    def interrupt(self) -> None:
        """Send SIGINT (a running cell gets ``KeyboardInterrupt``)."""
        self._signal(signal.SIGINT)

    def signal_kill(self) -> None:
        """Send SIGKILL to the worker and all it started, from any thread (the thread that
        owns the process reaps it and closes its pipes: :meth:`kill`)."""
        self._signal(signal.SIGKILL, group=True)

    def kill(self) -> None:
        """Kill the worker and everything it started, and reap it; close the pipes."""
        self._signal(signal.SIGKILL, group=True)
        try:
            self.proc.wait(timeout=5)  # under bwrap: bwrap reaps the worker, then exits
        except subprocess.TimeoutExpired:
            _deliver(lambda: os.killpg(self.proc.pid, signal.SIGKILL))
            self.proc.wait()
        self._close_pipes()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        mirror, self.mirror = self.mirror, None
        try:
            if mirror is not None:  # the held descriptor keeps a dead worker's tmpfs readable
                try:
                    mirror.push()
                finally:
                    mirror.close()
        finally:
            self.tasks.remove()
            if self.watch is not None:
                self.watch.stop()

    def stop(self, timeout: float = 1.0) -> None:
        """Ask the worker to exit; kill it if it does not within ``timeout`` seconds."""
        if self.is_alive():
            try:
                self.send({"op": "shutdown"}, time.monotonic() + timeout)
                self.proc.wait(timeout=timeout)
            except (CellTimeout, WorkerCrashed, subprocess.TimeoutExpired, OSError):
                pass  # it is killed below whatever went wrong (OSError: pipes already closed)
        self.kill()

    def exit_text(self) -> str:
        """Describe how the worker ended (waiting briefly for the exit status)."""
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if self.namespaced and code is not None and code > 128:
            code = 128 - code  # bwrap exits 128 + n for a worker killed by signal n
        text = describe_exit(code)
        if self.watch is not None and self.watch.reason:
            text += f" by the host, because {self.watch.reason}"
        return text

    def _signal(self, signum: int, *, group: bool = False) -> None:
        # Under bwrap the worker is pid 1 of its namespace: killing it ends every process there,
        # and bwrap (this host's child) exits once it has reaped it.
        if self.proc.returncode is not None:
            return
        if self._pidfd is not None:
            _deliver(lambda: signal.pidfd_send_signal(self._pidfd or -1, signum))
        elif group:
            _deliver(lambda: os.killpg(self.proc.pid, signum))
        else:
            _deliver(lambda: os.kill(self.proc.pid, signum))

    def take_channel(self) -> int | None:
        """Hand over the far end of the worker's ``ms`` channel (once; ``None`` after)."""
        fd, self.channel = self.channel, None
        return fd

    def _close_pipes(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self._to_worker, self._from_worker, self.take_channel()):
            try:
                if fd is not None:
                    os.close(fd)
            except OSError:
                pass


def _deliver(send: Callable[[], None]) -> None:
    try:
        send()
    except ProcessLookupError:
        pass  # already gone
    except PermissionError as exc:  # pragma: no cover - the pid was reused by another user
        if exc.errno != errno.EPERM:
            raise


def default_python() -> str:
    """The interpreter that runs workers: the host's own."""
    return sys.executable
