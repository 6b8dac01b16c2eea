"""Reading a JSONL file that may still be growing: complete lines only, from a byte offset.

Invariants:

- A line is handed out once it ends with a newline. A last line without one is either held
  back (``final=False``: the writer is still writing it; the next read starts at its first
  byte) or reported as truncated (``final=True``), never parsed half-written.
- Every complete line yields exactly one :class:`Line`: its 1-based number, its byte span and
  either its JSON value or the reason it could not be read (not UTF-8, not JSON, not an
  object). A bad line never stops the lines after it.
- :attr:`JsonlTail.offset` only moves past complete lines, so a reader that resumes from it
  neither skips nor repeats a line. A file replaced under the reader (a new inode, shorter than
  the offset, or rewritten in place: the last line read is no longer where it was) is not read
  at all and :attr:`JsonlTail.replaced` turns true: the follower's state describes the old
  file, so the caller starts a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from scrollctx.errors import FormatError
from scrollctx.ingest._jsonstream import loads

__all__ = ["JsonlTail", "Line"]

_READ_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Line:
    """One complete (or, when final, truncated) line: a JSON object, or why it is not one."""

    number: int
    start: int
    end: int
    value: dict[str, Any] | None
    problem: str | None = None


class JsonlTail:
    """A cursor over one JSONL file that reads the lines completed since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0
        self.replaced = False
        self._identity: tuple[int, int] | None = None
        self._anchor: tuple[int, bytes] | None = None  # (start, digest) of the last line read

    def read(self, *, final: bool) -> Iterator[Line]:
        """Yield the lines completed since the last call (and a truncated tail when final)."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            message = f"cannot read {self.path}: {exc.strerror}"
            raise FormatError(message, path=str(self.path)) from exc
        with handle:
            if self._was_replaced(os.fstat(handle.fileno())) or self._moved(handle):
                self.replaced = True
                return
            handle.seek(self.offset)
            pending = b""
            while chunk := handle.read(_READ_BYTES):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    yield self._line(raw, self.offset + len(raw) + 1)
            if pending and final:
                yield self._truncated(pending)

    def _was_replaced(self, stat: os.stat_result) -> bool:
        identity = (stat.st_dev, stat.st_ino)
        if self._identity is None:
            self._identity = identity
        return self.replaced or identity != self._identity or stat.st_size < self.offset

    def _moved(self, handle: BinaryIO) -> bool:
        if self._anchor is None:
            return False
        start, digest = self._anchor
        handle.seek(start)
        return hashlib.sha1(handle.read(self.offset - start)).digest() != digest

    def _line(self, raw: bytes, end: int) -> Line:
        start, self.offset = self.offset, end
        self._anchor = (start, hashlib.sha1(raw + b"\n").digest())
        self.lines += 1
        value, problem = _decode(raw)
        return Line(self.lines, start, end, value, problem)

    def _truncated(self, raw: bytes) -> Line:
        # Not consumed: a later read (after the writer finishes the line) starts here again.
        number = self.lines + 1
        problem = (
            f"line {number} has no newline at the end ({len(raw)} bytes): the file is "
            "truncated or still being written; it is imported once the line is complete"
        )
        return Line(number, self.offset, self.offset + len(raw), None, problem)


def _decode(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    text = raw.removesuffix(b"\r")
    if not text.strip():
        return None, None
    try:
        value = loads(text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, f"is not UTF-8 ({exc.reason} at byte {exc.start} of the line)"
    except json.JSONDecodeError as exc:
        return None, f"is not valid JSON ({exc.msg}, column {exc.colno})"
    if not isinstance(value, dict):
        return None, f"is a JSON {type(value).__name__}, not an object"
    return value, None
