"""Length-prefixed JSON frames over a pipe: a 4-byte big-endian length, then UTF-8 JSON.

Both sides use this module. The host treats every frame from the worker as untrusted: a length
above ``max_size``, bytes that are not JSON, or JSON that is not an object raise
:class:`~scrollctx.errors.ProtocolError`. A reader keeps its partial buffer across interruptions
(a ``KeyboardInterrupt`` during a read never desynchronizes the stream).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

from scrollctx.errors import ProtocolError, WorkerCrashed

__all__ = ["MAX_FRAME", "FrameReader", "encode_frame", "write_frame"]

MAX_FRAME = 16 * 1024 * 1024
"""The largest frame either side accepts, in bytes."""

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16


def encode_frame(message: dict[str, Any]) -> bytes:
    """Return the wire bytes of one message (lone surrogates, e.g. from undecodable file names
    a cell printed, become ``?`` rather than failing the frame)."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    body = text.encode("utf-8", "replace")
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: dict[str, Any] | bytes) -> None:
    """Write one whole frame to ``fd`` (blocking)."""
    data = message if isinstance(message, bytes) else encode_frame(message)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FrameReader:
    """Reads frames from one file descriptor, with an optional deadline per read."""

    def __init__(self, fd: int, *, max_size: int = MAX_FRAME) -> None:
        self.fd = fd
        self.max_size = max_size
        self._buffer = bytearray()
        self.last_size = 0
        """The size in bytes of the frame :meth:`read` returned last."""

    def read(self, deadline: float | None = None) -> dict[str, Any] | None:
        """Return the next frame, or ``None`` if ``deadline`` (a ``time.monotonic`` value) passed.

        Raises:
            WorkerCrashed: the other end closed the pipe.
            ProtocolError: the bytes are not a valid frame.
        """
        while True:
            frame = self._take()
            if frame is not None:
                return frame
            if deadline is not None and not self._wait(deadline):
                return None
            chunk = os.read(self.fd, _CHUNK)
            if not chunk:
                raise WorkerCrashed("the worker closed its control pipe (it exited or crashed)")
            self._buffer += chunk

    def _wait(self, deadline: float) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([self.fd], [], [], remaining)
        return bool(ready)

    def _take(self) -> dict[str, Any] | None:
        if len(self._buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buffer)
        if size > self.max_size:
            raise ProtocolError(
                f"frame of {size} bytes exceeds the {self.max_size}-byte limit; "
                "the worker is restarted"
            )
        end = _HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        self.last_size = size
        return _decode(body)


def _decode(body: bytes) -> dict[str, Any]:
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
