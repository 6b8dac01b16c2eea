"""The memory reader: the one process of a kernel that opens the store, answering ``ms`` calls.

The worker (model code) holds no path to the Event Log: its ``ms`` is a
:class:`~scrollctx.surface.RemoteSurface` whose calls cross worker -> host -> reader and back.
The host starts this process on a kernel's first ``ms`` call as
``python -I -m scrollctx.kernel._reader --fd-in N --fd-out M`` (and restarts it when it dies)
and brokers every call: it checks each frame's header, bounds each call's time and each reply's
size, and turns a reader that fails into an error for the call that hit it. The host's JSON
memory tools use a reader of their own the same way, so no query ever runs in the host.

Protocol (frames of :mod:`._frames`; the host picks the request ids, the reader answers each
request with its id):

1. boot, id 0: ``{"op": "boot", "db_path", "scratch", "binding": {session_id, task_id,
   agent_id}, "budgets": {seconds, rows, bytes}, "limits": {heap, value_bytes, reply_bytes,
   address_space}, "policy": <the kernel's policy on the wire>}``;
2. the reader imports the surface, confines itself with the sandbox's own steps under a reader
   plan (:func:`reader_plan`: address space ``limits.address_space``, no file may grow, private
   network namespace, no capabilities, Landlock read-only on Python, the store's database,
   ``-wal``, ``-shm`` and ``payloads/``, seccomp: no fork, exec or sockets), sets SQLite's hard
   heap limit, opens the store as a :class:`~scrollctx.surface.MemorySurface` (each value capped
   at ``limits.value_bytes``, temporary data in memory) and answers, id 0:
   ``{"op": "ready", "layers": {...}, "ms": "bound" | "<why not>"}``;
3. then each request ``{"op": "ms", "call", "method", "kwargs"}`` is answered by
   :func:`~scrollctx.surface._remote.answer_call` (the reply format is documented there), until
   ``{"op": "shutdown"}`` or the host's end of the pipe closes.

Invariants:

- no model code runs here: a request names a public call of ``MemorySurface`` and carries data
  (decoded by :mod:`scrollctx.surface._codec`, never unpickled or evaluated);
- every answer is bounded: time by the surface's progress-handler deadline (and by the host,
  which kills a call past its budget plus a grace period), SQLite's memory by the hard heap
  limit, one value by ``SQLITE_LIMIT_LENGTH``, rows and bytes by the surface's budgets, the
  reply by ``reply_bytes`` and the whole process by ``RLIMIT_AS``; a call that runs out of
  memory is answered with a :class:`~scrollctx.errors.QueryError` saying so;
- SIGINT (sent by the host when the *cell's* timeout passes during a call) stops the running
  call only; between calls it is ignored;
- one request at a time, answered in order; the reader dies with the host's thread that
  started it (``PR_SET_PDEATHSIG``, as the worker) and exits when its control pipe closes.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sqlite3
import sys
from collections.abc import Mapping
from types import FrameType
from typing import Any

from scrollctx.errors import WorkerCrashed
from scrollctx.kernel._frames import (
    FrameReader,
    encode_frame,
    frame_parts,
    pipe_arguments,
    write_frame,
)
from scrollctx.kernel._sandbox import SandboxPlan, apply_sandbox, die_with_host
from scrollctx.surface import Budgets, open_surface
from scrollctx.surface._remote import answer_call, error_reply

__all__ = ["main", "reader_plan"]

_OPEN_FILES = 64


def reader_plan(boot: Mapping[str, Any]) -> SandboxPlan:
    """The sandbox plan of a reader: the kernel's layers, with the reader's own limits."""
    limits = boot["limits"]
    plan = SandboxPlan.from_wire(boot["policy"], boot["scratch"], boot["db_path"])
    plan.limits = {"address_space": int(limits["address_space"]), "file_size": 0,
                   "open_files": _OPEN_FILES}  # fmt: skip
    return plan


class Reader:
    """One reader: its pipe, its surface, and whether SIGINT may stop the running call."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.reader = FrameReader(fd_in)
        self.fd_out = fd_out
        self.surface: Any = None
        self.reply_bytes = 0
        self.memory_hint = ""
        self._calling = False

    def boot(self) -> None:
        boot = self.reader.read()
        if not isinstance(boot, dict) or boot.get("op") != "boot":
            raise SystemExit("the first frame must be a boot frame")
        report = apply_sandbox(reader_plan(boot))
        limits = boot["limits"]
        self.reply_bytes = int(limits["reply_bytes"])
        self.memory_hint = _memory_hint(limits)
        if limits.get("heap"):
            # Process-wide, and a pragma can only lower it afterwards: no query raises it.
            sqlite3.connect(":memory:").execute(f"PRAGMA hard_heap_limit = {int(limits['heap'])}")
        binding = boot["binding"]
        try:
            self.surface = open_surface(
                boot["db_path"],
                session_id=binding.get("session_id"),
                task_id=binding.get("task_id"),
                agent_id=binding.get("agent_id"),
                budgets=Budgets(**boot["budgets"]),
                value_bytes=limits.get("value_bytes"),
            )
            state = "bound"
        except Exception as exc:  # noqa: BLE001 - reported to the host, shown on every call
            state = f"{type(exc).__name__}: {exc}"
        write_frame(self.fd_out, encode_frame(0, {"op": "ready", "layers": report, "ms": state}))

    def serve(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)
        while True:
            message = self.reader.read() or {}
            if message.get("op") == "shutdown":
                return
            request = self.reader.last_id
            write_frame(self.fd_out, frame_parts(request, self._answer(message)))

    def _answer(self, message: dict[str, Any]) -> bytes:
        if self.surface is None:
            return error_reply(message.get("call"), RuntimeError("the store is not open"))
        self._calling = True
        try:
            return answer_call(self.surface, message, limit=self.reply_bytes,
                               memory_hint=self.memory_hint)  # fmt: skip
        except KeyboardInterrupt as exc:  # arrived after the surface call, while encoding
            return error_reply(message.get("call"), exc)
        finally:
            self._calling = False

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._calling:
            raise KeyboardInterrupt


def _memory_hint(limits: Mapping[str, Any]) -> str:
    heap = limits.get("heap")
    sqlite_part = f"{int(heap) // 1024**2:,} MiB for SQLite, " if heap else ""
    return (
        f"the memory reader allows {sqlite_part}{int(limits['address_space']) // 1024**2:,} MiB "
        "in all; narrow it: fewer rows, shorter values, a LIMIT"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the reader until the host sends ``shutdown`` or closes the pipe."""
    die_with_host()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable()
    reader = Reader(*pipe_arguments("scrollctx.kernel._reader", argv))
    try:
        reader.boot()
        reader.serve()
    except WorkerCrashed:
        return 0  # the host closed the pipe
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
