"""The memory reader: the one process of a kernel that opens the store, answering ``ms`` calls.

The worker (model code) holds no path to the Event Log: its ``ms`` is a
:class:`~scrollctx.surface.RemoteSurface` whose calls reach this process. The host starts it on
a kernel's first ``ms`` call as ``python -I -m scrollctx.kernel._reader --fd-in N --fd-out M
--fd-clock C [--fd-ms K]`` (and restarts it when it dies). That first call, and the calls of
the host's JSON memory tools (a reader of their own), come through the host, which checks each
frame's header and bounds each call's time and reply. ``--fd-ms`` is the reader's end of a
socket pair the worker was started with (its *channel*): the worker's later calls come over
it, past the host (one hop each way instead of two). Whatever comes over it is untrusted, and
the host's checks on its path are kept: the request's size is checked here against the same
limit, by the header alone; the call's deadline by the host's watch, which reads the *call
clock* (``--fd-clock``: shared memory where this process writes when its running call started)
and kills a call past it, however it came; the reader's CPU between cells by the same watch.

Protocol (frames of :mod:`._frames`; each request is answered with its id, on the pipe or the
channel it came from):

1. boot, id 0: ``{"op": "boot", "db_path", "scratch", "binding": {session_id, task_id,
   agent_id}, "budgets": {seconds, rows, bytes}, "limits": {heap, value_bytes, reply_bytes,
   address_space}, "max_request", "policy": <the kernel's policy on the wire>}``;
2. the reader imports the surface, confines itself with the sandbox's own steps under a reader
   plan (:func:`reader_plan`: address space ``limits.address_space``, no file may grow, private
   network namespace, no capabilities, Landlock read-only on Python, the store's database,
   ``-wal``, ``-shm`` and ``payloads/``, seccomp: no fork, exec or sockets), sets SQLite's hard
   heap limit, opens the store as a :class:`~scrollctx.surface.MemorySurface` (each value capped
   at ``limits.value_bytes``, temporary data in memory) and answers, id 0:
   ``{"op": "ready", "layers": {...}, "ms": "bound" | "<why not>"}``; just before, once bound,
   it says ``{"op": "channel"}`` (id 0) on the channel, after which the worker sends its calls
   there;
3. then each request ``{"op": "ms", "call", "method", "kwargs"}`` is answered by
   :func:`~scrollctx.surface._remote.run_call` (the reply format is documented there), until
   ``{"op": "shutdown"}`` or the host's end of the pipe closes;
4. the host may also send, on its pipe, ``{"op": "ms_ahead", "method", "kwargs"}`` under a
   cell's request id: the call it read off that cell's text (:mod:`._ahead`). The reader runs
   it at once and answers nothing; the cell's first request over the channel gets that answer
   if it is the same call and the store has not changed since, else is run as usual. The
   counts of such calls (run, used, cut short) follow the call clock's start time.

Invariants:

- no model code runs here: a request names a public call of ``MemorySurface`` and carries data
  (decoded by :mod:`scrollctx.surface._codec`, never unpickled or evaluated) under an int call
  id (a request with any other id is answered with an error, id ``null``); a request larger
  than ``max_request`` (the kernel's limit of one call's arguments) is refused by its header;
  on the channel that closes the channel (the worker's later calls go through the host), as
  do bytes that are not a request; a malformed request from the host's pipe is answered with
  an error;
- every answer is bounded: time by the surface's progress-handler deadline (and by the host,
  which kills a call past its budget plus a grace period), SQLite's memory by the hard heap
  limit, one value by ``SQLITE_LIMIT_LENGTH``, rows and bytes by the surface's budgets, the
  reply by ``reply_bytes`` and the whole process by ``RLIMIT_AS``; a call that runs out of
  memory is answered with a :class:`~scrollctx.errors.QueryError` saying so;
- SIGINT (sent by the host when the *cell's* timeout passes) stops the running call only;
  between calls it is ignored;
- one request at a time, answered in order; the reader dies with the host's thread that
  started it (``PR_SET_PDEATHSIG``, as the worker) and exits when its control pipe closes.
"""

from __future__ import annotations

import faulthandler
import mmap
import os
import select
import signal
import sqlite3
import struct
import sys
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from scrollctx.errors import ProtocolError, QueryError, WorkerCrashed
from scrollctx.kernel._ahead import AheadCall, call_key
from scrollctx.kernel._frames import (
    MAX_FRAME,
    Body,
    Frame,
    FrameReader,
    Pipes,
    decode_body,
    encode_frame,
    frame_parts,
    hang_up,
    pipe_arguments,
    write_frame,
    write_frame_by,
)
from scrollctx.kernel._sandbox import SandboxPlan, apply_sandbox, die_with_host
from scrollctx.surface import Budgets, open_surface
from scrollctx.surface._remote import Answer, error_reply, run_call
from scrollctx.surface._surface import call_deadline, recall, remembered, store_version

__all__ = ["CLOCK", "main", "reader_plan"]

_OPEN_FILES = 64

CLOCK_START = struct.Struct("=d")
"""The clock's first field alone (written at every call)."""
_AHEAD_COUNTS = struct.Struct("=QQQ")
CLOCK = struct.Struct("=dQQQ")
"""The shared call clock's layout: when the running call started (0.0: none runs); then the
calls answered ahead (:mod:`._ahead`): run, used, and cut short (their request had not come)."""


def reader_plan(boot: Mapping[str, Any]) -> SandboxPlan:
    """The sandbox plan of a reader: the kernel's layers, with the reader's own limits."""
    limits = boot["limits"]
    plan = SandboxPlan.from_wire(boot["policy"], boot["scratch"], boot["db_path"])
    plan.limits = {"address_space": int(limits["address_space"]), "file_size": 0,
                   "open_files": _OPEN_FILES}  # fmt: skip
    return plan


class Reader:
    """One reader: its pipes, its surface, and whether SIGINT may stop the running call."""

    def __init__(self, pipes: Pipes) -> None:
        self.reader = FrameReader(pipes.fd_in)
        self.fd_out = pipes.fd_out
        self.channel = FrameReader(pipes.ms) if pipes.ms is not None else None
        if self.channel is not None:
            os.set_blocking(self.channel.fd, False)  # the worker may stall: waits are bounded
        self.stall_seconds = Budgets().seconds
        """How long the worker may keep this reader waiting on the channel (a call's budget)."""
        self.clock = _open_clock(pipes.clock)
        self.surface: Any = None
        self.reply_bytes = 0
        self.ahead_seconds = 0.0
        self.memory_hint = ""
        self.ahead: AheadCall | None = None
        """The answer to the running cell's first call, ready before its request came."""
        self.last_cell = 0
        """The highest cell id a request over the channel has carried."""
        self._calling = False

    def boot(self) -> None:
        boot = self.reader.read()
        if not isinstance(boot, dict) or boot.get("op") != "boot":
            raise SystemExit("the first frame must be a boot frame")
        report = apply_sandbox(reader_plan(boot))
        limits = boot["limits"]
        self.reply_bytes = int(limits["reply_bytes"])
        self.ahead_seconds = float(limits["ahead_seconds"])
        self.memory_hint = _memory_hint(limits)
        self.stall_seconds = float(boot["budgets"]["seconds"])
        # The largest request the host forwards or the worker may send: the kernel's limit of
        # one call's arguments; a larger frame is refused before its body is read.
        self.reader.max_size = int(boot.get("max_request", MAX_FRAME))
        if self.channel is not None:
            self.channel.max_size = self.reader.max_size
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
        if self.channel is not None and state == "bound":
            # Before ready: once the host has its answer to the call that started this reader,
            # the worker finds the channel open for its next call.
            self._send_channel(encode_frame(0, {"op": "channel"}))
        write_frame(self.fd_out, encode_frame(0, {"op": "ready", "layers": report, "ms": state}))

    def serve(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)
        while True:
            source = self._next_source()
            if source is self.reader:
                message = self._message(self.reader.read_body() or b"")
                if message.get("op") == "shutdown":
                    return
                if message.get("op") == "ms_ahead":
                    self._run_ahead(self.reader.last_id, message)
                    continue
                write_frame(self.fd_out, frame_parts(self.reader.last_id, self._answer(message)))
            else:
                self._serve_channel()

    def _next_source(self) -> FrameReader:
        # The host's pipe first; the worker's channel when it holds a request.
        channel = self.channel
        if channel is None or self.reader.buffered():
            return self.reader
        if channel.buffered():
            return channel
        ready, _, _ = select.select([self.reader.fd, channel.fd], [], [])
        return self.reader if self.reader.fd in ready else channel

    def _serve_channel(self) -> None:
        # The worker is untrusted: a frame over the limit, bytes that are not a request, a
        # frame begun and not finished within a call's budget, or a worker gone close the
        # channel (its next calls come through the host); the reader itself goes on.
        channel = self.channel
        if channel is None:
            return
        try:
            body = channel.read_body(time.monotonic() + self.stall_seconds)
            if body is None:
                raise ProtocolError("the worker stopped in the middle of a frame")
            message = decode_body(body)
        except (ProtocolError, WorkerCrashed, OSError):
            self._close_channel()
            return
        cell = channel.last_id
        self.last_cell = max(self.last_cell, cell)
        self._send_channel(frame_parts(cell, self._answer(message, cell)))

    def _send_channel(self, frame: bytes | Frame) -> None:
        # A worker that stops reading its replies holds the reader no longer than a call may
        # run; then the channel closes.
        if self.channel is None:
            return
        try:
            sent = write_frame_by(self.channel.fd, frame, time.monotonic() + self.stall_seconds)
        except OSError:  # the worker closed its end
            sent = False
        if not sent:
            self._close_channel()

    def _close_channel(self) -> None:
        if self.channel is not None:
            hang_up(self.channel.fd)
            self.channel = None

    def _message(self, body: Body) -> dict[str, Any]:
        try:
            return decode_body(body)
        except ProtocolError as exc:
            return {"op": "malformed", "error": str(exc)}

    def _answer(self, message: dict[str, Any], cell: int | None = None) -> bytes:
        # Any request ends the guess: the first request of its cell over the channel (``cell``)
        # gets its answer if it is that call; otherwise the guess is dropped, its traces
        # undone, before anything runs.
        refusal = self._refusal(message)
        ahead = self._ahead_answer(cell, message) if refusal is None and cell is not None else None
        self._drop_ahead()
        if refusal is not None:
            return refusal
        return (ahead or self._call(message)).reply(message.get("call"), self.reply_bytes)

    def _refusal(self, message: dict[str, Any]) -> bytes | None:
        call = message.get("call")
        if not _is_call_id(call):
            # The reply echoes the id: any other value (a list nested as deep as the decoder
            # reads is one level too deep to encode again) would be echoed back unchecked.
            refused = QueryError("the memory reader refused a request: its call id is not an int")
            return error_reply(None, refused)
        if message.get("op") != "ms":
            reason = message.get("error") or f"unknown op {str(message.get('op'))[:40]!r}"
            refused = QueryError(f"the memory reader refused a request: {str(reason)[:200]}")
            return error_reply(call, refused)
        if self.surface is None:
            return error_reply(call, RuntimeError("the store is not open"))
        return None

    def _call(self, message: Mapping[str, Any]) -> Answer:
        self._calling = True
        _set_clock(self.clock, time.monotonic())
        try:
            return run_call(self.surface, message, memory_hint=self.memory_hint)
        except KeyboardInterrupt as exc:  # arrived after the surface call returned
            return Answer(message.get("method"), error=exc)
        finally:
            # Not interruptible first: a SIGINT landing between the two would escape the reader.
            self._calling = False
            _set_clock(self.clock, 0.0)

    # -- calls answered ahead (:mod:`._ahead`) ----------------------------------------------

    def _run_ahead(self, cell: int, message: dict[str, Any]) -> None:
        # The host's guess at the first call of cell ``cell``; once that cell's first request
        # has come over the channel, the guess is too late to be of use.
        self._drop_ahead()
        if self.surface is None or self.channel is None or cell <= self.last_cell:
            return  # (the host sends none when answering ahead is off: ahead_seconds 0)
        ahead = AheadCall(cell, call_key(message), self._version(), remembered(self.surface))
        deadline = call_deadline(self.surface)
        deadline.checkpoint = (time.monotonic() + self.ahead_seconds, lambda: self._go_on(ahead))
        try:
            answer = self._call(message)
        finally:
            cut, deadline.checkpoint, deadline.cut = deadline.cut, None, False
        self._count(run=1, cut=int(cut))
        ahead.answer, self.ahead = answer, ahead
        ended = answer.error is None and not cut and len(answer.encoded) <= self.reply_bytes
        if not (ahead.extended or ended):
            self._drop_ahead()  # cut, failed, or too big to send: the call will run itself

    def _ahead_answer(self, cell: int, message: dict[str, Any]) -> Answer | None:
        # The guess's answer, taken, if it is the one this call would get now.
        ahead = self.ahead
        answer = ahead.answer_for(cell, message, self._version()) if ahead else None
        if answer is not None:
            self.ahead = None  # used: what it left in the surface is the call's own
            self._count(used=1)
        return answer

    def _drop_ahead(self) -> None:
        # An answer ahead that goes unused leaves no trace: what the surface kept from call to
        # call (the search's term counts) is put back as it was before that guess ran.
        ahead, self.ahead = self.ahead, None
        if ahead is not None and self.surface is not None:
            recall(self.surface, ahead.remembered)

    def _go_on(self, ahead: AheadCall) -> bool:
        # At the checkpoint: go on, as the call itself, only if its request is the next frame
        # on the channel (it then gets the call's whole budget from now).
        peeked = self.channel.peek() if self.channel is not None else None
        if peeked is None or peeked[0] != ahead.cell:
            return False
        try:
            request = decode_body(peeked[1])
        except ProtocolError:
            return False
        if call_key(request) != ahead.key:
            return False
        now = time.monotonic()
        call_deadline(self.surface).expires_at = now + self.surface.budgets.seconds
        _set_clock(self.clock, now)
        ahead.extended = True
        return True

    def _version(self) -> int:
        return store_version(self.surface) if self.surface is not None else -1

    def _count(self, *, run: int = 0, used: int = 0, cut: int = 0) -> None:
        if self.clock is not None:
            counts = _AHEAD_COUNTS.unpack_from(self.clock, CLOCK_START.size)
            added = (n + d for n, d in zip(counts, (run, used, cut), strict=True))
            _AHEAD_COUNTS.pack_into(self.clock, CLOCK_START.size, *added)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self._calling:
            raise KeyboardInterrupt


def _is_call_id(call: object) -> bool:
    # Workers and the host number their calls with ints; JSON ints are bounded by the decoder.
    return isinstance(call, int) and not isinstance(call, bool)


def _open_clock(fd: int | None) -> mmap.mmap | None:
    # When the reader's current call started (monotonic seconds; 0.0: none runs), in memory the
    # host reads: its watch kills a call that runs past its deadline, whichever way it came.
    if fd is None:
        return None
    try:
        return mmap.mmap(fd, CLOCK.size)
    finally:
        os.close(fd)


def _set_clock(clock: mmap.mmap | None, value: float) -> None:
    if clock is not None:
        CLOCK_START.pack_into(clock, 0, value)


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
    reader = Reader(pipe_arguments("scrollctx.kernel._reader", argv))
    try:
        reader.boot()
        reader.serve()
    except WorkerCrashed:
        return 0  # the host closed the pipe
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
