"""Framed JSON messages over a pipe: a 12-byte header, then the UTF-8 JSON body.

The header is the body's length (4 bytes) and the request id (8 bytes), big-endian; the body is
one JSON object. Every process of a kernel (host, worker, memory reader) uses this module.

A reader checks the header before it reads a byte of the body: a length above its
``max_size``, or, when the caller names the request that is running (``expect``), a frame for
any other request raises :class:`~scrollctx.errors.ProtocolError` at once. A forged or foreign
frame therefore costs the host a header's worth of work however large it claims to be; only a
frame the host is waiting for, within the size the protocol needs, is ever decoded; one it only
forwards (an ``ms`` reply) is not decoded at all, nor copied: the reader hands over its buffer
as the body, and :func:`frame_parts` writes a new header before it with one ``writev``. Bytes that
are not JSON, JSON that is not an object, nesting too deep or an integer too long are protocol
errors too. A reader keeps its partial buffer across interruptions (a ``KeyboardInterrupt``
during a read never desynchronizes the stream).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import struct
import time
from typing import Any, NamedTuple, TypeGuard

from scrollctx.errors import ProtocolError, WorkerCrashed

__all__ = [
    "HEADER",
    "MAX_COUNT",
    "MAX_FRAME",
    "FrameReader",
    "Body",
    "Pipes",
    "Frame",
    "as_views",
    "consume",
    "decode_body",
    "encode_frame",
    "frame_parts",
    "hang_up",
    "is_count",
    "pipe_arguments",
    "write_frame",
    "write_frame_by",
]

MAX_FRAME = 16 * 1024 * 1024
"""The largest body the host sends (a cell, a tool's result, an ``ms`` result), in bytes."""

HEADER = struct.Struct(">IQ")
"""Body length, request id."""

_CHUNK = 1 << 16
_MAX_READ = 1 << 20

MAX_COUNT = 2**63
"""A count a frame carries (characters hidden, variables not listed) is below this."""

Body = bytes | bytearray
"""A frame's body as read: ``bytes``, or the reader's own buffer handed over whole."""
Frame = tuple[bytes, Body]
"""A frame as pieces to write: its header, then its body."""


def is_count(value: object) -> TypeGuard[int]:
    """Whether a field of an untrusted frame is a count: an int (not a bool) in 0..2**63."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT


def encode_frame(request: int, message: dict[str, Any]) -> bytes:
    """Return the wire bytes of one message for ``request`` (lone surrogates, e.g. from
    undecodable file names a cell printed, become ``?`` rather than failing the frame)."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    body = text.encode("utf-8", "replace")
    return HEADER.pack(len(body), request) + body


def frame_parts(request: int, body: Body) -> Frame:
    """Return the wire pieces of an already encoded body, its header then the body itself:
    written with one ``writev``, a forwarded body is never copied, however large."""
    return HEADER.pack(len(body), request), body


def write_frame(fd: int, frame: bytes | Frame) -> None:
    """Write one whole frame to ``fd`` (blocking)."""
    views = as_views(frame)
    while views:
        consume(views, os.writev(fd, views))


def write_frame_by(fd: int, frame: bytes | Frame, deadline: float) -> bool:
    """Write one whole frame to the non-blocking ``fd`` before ``deadline``.

    Returns False if the other end stopped reading first (part of the frame may be written):
    a peer that is not trusted must not hold the writer longer than it may wait.
    """
    views = as_views(frame)
    while views:
        try:
            consume(views, os.writev(fd, views))
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [fd], [], remaining)[1]:
                return False
    return True


def as_views(frame: bytes | Frame) -> list[memoryview]:
    """The pieces of ``frame`` to hand to ``os.writev``."""
    pieces = (frame,) if isinstance(frame, bytes) else frame
    return [memoryview(piece) for piece in pieces if piece]


def consume(views: list[memoryview], written: int) -> None:
    """Drop the first ``written`` bytes from ``views`` (after a partial ``writev``)."""
    while written and views:
        if written < len(views[0]):
            views[0] = views[0][written:]
            return
        written -= len(views.pop(0))


class FrameReader:
    """Reads frames from one file descriptor, with an optional deadline per read."""

    def __init__(self, fd: int, *, max_size: int = MAX_FRAME) -> None:
        self.fd = fd
        self.max_size = max_size
        """The largest body accepted; the host sets it from what the protocol needs."""
        self._buffer = bytearray()
        self.last_size = 0
        """The size in bytes of the body read last."""
        self.last_id = 0
        """The request id of the frame read last."""
        self.last_body: Body = b""
        """The body read last, as it arrived (for forwarding it unchanged)."""

    def read(
        self, deadline: float | None = None, *, expect: int | None = None
    ) -> dict[str, Any] | None:
        """Return the next frame's message, or ``None`` if ``deadline`` (monotonic) passed.

        Raises:
            WorkerCrashed: the other end closed the pipe.
            ProtocolError: the bytes are not a valid frame, or (with ``expect``) the frame is
                for another request.
        """
        body = self.read_body(deadline, expect=expect)
        return None if body is None else decode_body(body)

    def read_body(self, deadline: float | None = None, *, expect: int | None = None) -> Body | None:
        """Like :meth:`read`, but return the body undecoded (to forward it unchanged)."""
        while True:
            body = self._take(expect)
            if body is not None:
                return body
            if deadline is not None and not self._wait(deadline):
                return None
            chunk = os.read(self.fd, self._wanted())
            if not chunk:
                raise WorkerCrashed("the other end closed its control pipe (it exited or crashed)")
            self._buffer += chunk

    def peek(self) -> tuple[int, bytes] | None:
        """The next frame's request id and body if it has arrived whole, left to be read.

        For a non-blocking descriptor: what has come is taken in without waiting. None also if
        the frame is over the size limit (reading it raises) or the descriptor fails.
        """
        try:
            self._buffer += os.read(self.fd, self._wanted())
        except OSError:  # BlockingIOError: nothing more has come
            pass
        if not self.buffered():
            return None
        size, request = HEADER.unpack_from(self._buffer)
        if size > self.max_size:
            return None
        return request, bytes(self._buffer[HEADER.size : HEADER.size + size])

    def buffered(self) -> bool:
        """Whether a whole frame is already buffered (``select`` on the descriptor would not
        show it)."""
        if len(self._buffer) < HEADER.size:
            return False
        size: int = HEADER.unpack_from(self._buffer)[0]
        return len(self._buffer) >= HEADER.size + size

    def _wanted(self) -> int:
        # Once a header is in, read the rest of its body in large pieces.
        if len(self._buffer) < HEADER.size:
            return _CHUNK
        size: int = HEADER.unpack_from(self._buffer)[0]
        return max(_CHUNK, min(_MAX_READ, HEADER.size + size - len(self._buffer)))

    def _wait(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([self.fd], [], [], remaining)
        return bool(ready)

    def _take(self, expect: int | None) -> Body | None:
        if len(self._buffer) < HEADER.size:
            return None
        size, request = HEADER.unpack_from(self._buffer)
        if size > self.max_size:
            raise ProtocolError(
                f"frame of {size:,} bytes exceeds the {self.max_size:,}-byte limit; "
                "the worker is restarted"
            )
        if expect is not None and request != expect:
            raise ProtocolError(
                f"a frame for request {request} arrived while request {expect} was running; "
                "the worker is restarted"
            )
        end = HEADER.size + size
        if len(self._buffer) < end:
            return None
        body: Body
        if len(self._buffer) == end:  # the usual case: hand the buffer over, copying nothing
            body, self._buffer = self._buffer, bytearray()
            del body[: HEADER.size]  # O(1): a bytearray drops its head by moving its start
        else:
            with memoryview(self._buffer) as view:
                body = bytes(view[HEADER.size : end])
            del self._buffer[:end]
        self.last_size, self.last_id, self.last_body = size, request, body
        return body


def decode_body(body: Body) -> dict[str, Any]:
    """Decode one frame's body: a JSON object, or :class:`ProtocolError` saying why not."""
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"frame is not UTF-8 JSON ({exc}); the worker is restarted") from exc
    except (RecursionError, ValueError) as exc:  # nesting too deep, an integer too long
        raise ProtocolError(
            f"frame cannot be decoded safely ({type(exc).__name__}: {str(exc)[:120]}); "
            "the worker is restarted"
        ) from exc
    if not isinstance(message, dict):
        raise ProtocolError(
            f"frame is JSON {type(message).__name__}, not an object; the worker is restarted"
        )
    return message


class Pipes(NamedTuple):
    """The descriptors a kernel process is started with (``None``: not given)."""

    fd_in: int
    fd_out: int
    ms: int | None = None
    """The worker's and its memory reader's ends of their direct ``ms`` channel."""
    clock: int | None = None
    """The memory reader's call clock, shared with the host (:mod:`._reader_host`)."""


def hang_up(fd: int) -> None:
    """Close a socket's both directions, then the descriptor: the peer sees the end at once,
    even where another process holds a copy of it (bwrap's monitor, for a reader)."""
    import socket  # here: most workers never close a channel, and their start pays for imports

    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not a socket, or already shut: closing is all there is to do
    os.close(fd)


def pipe_arguments(prog: str, argv: list[str] | None) -> Pipes:
    """Parse a kernel process's command line, ``--fd-in N --fd-out M [--fd-ms K]
    [--fd-clock C]``: its control pipe ends, and the optional descriptors of :class:`Pipes`."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    parser.add_argument("--fd-ms", type=int)
    parser.add_argument("--fd-clock", type=int)
    args = parser.parse_args(argv)
    return Pipes(args.fd_in, args.fd_out, args.fd_ms, args.fd_clock)
