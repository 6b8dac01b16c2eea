"""Reading JSON inputs without loading big files whole: a streaming array decoder and a probe.

Invariants:

- :func:`iter_array` holds at most one element of the top-level array in memory (plus the
  chunk being read), so memory is bounded by the largest element, not by the file. Only a
  malformed element forces reading on to the end of the file before the error is raised.
- :func:`iter_jsonl` reads one line at a time.
- Every problem with the bytes (not UTF-8, empty, malformed, truncated, trailing garbage,
  nesting too deep for the parser) raises :class:`~scrollctx.errors.FormatError` naming the
  file and the line; nothing else escapes. Importers decode JSON text through :func:`loads`,
  so a value nested too deeply is malformed input there too, never a ``RecursionError``.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from scrollctx.errors import FormatError

__all__ = ["Sample", "iter_array", "iter_jsonl", "load_whole", "loads", "not_json", "probe"]

CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\r\n"
_NUMBER_CHARS = "0123456789.eE+-"
_DECODER = json.JSONDecoder()

Shape = Literal["array", "object", "jsonl", "text"]


@dataclass(frozen=True, slots=True)
class Sample:
    """What a sniffer sees of a file: its top-level shape and its first record.

    ``first`` is the first element of a top-level array, the whole top-level object, the
    first JSONL line's value, or (shape ``text``: not JSON) the file's first characters.
    """

    path: Path
    shape: Shape
    first: Any


def loads(text: str) -> Any:
    """Parse JSON text; a value nested too deeply to parse is a :class:`json.JSONDecodeError`.

    The parser recurses once per level: thousands of ``[`` would raise ``RecursionError``.
    """
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise _too_deep(text, 0) from exc


def _decode(text: str, pos: int) -> tuple[Any, int]:
    """One value of ``text`` from ``pos`` (``raw_decode``), nested too deeply: malformed."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError as exc:
        raise _too_deep(text, pos) from exc


def _too_deep(text: str, pos: int) -> json.JSONDecodeError:
    return json.JSONDecodeError("nested too deeply to parse", text, pos)


def probe(path: Path) -> Sample:
    """Return the shape and first record of ``path``; raise :class:`FormatError` if unreadable."""
    head = _first_char(path)
    if head == "[":
        for first in iter_array(path):
            return Sample(path, "array", first)
        raise FormatError(f"{path} holds an empty JSON array: nothing to import", path=str(path))
    if head != "{":
        return Sample(path, "text", _head_text(path))
    first_line = _first_line_value(path)
    if first_line is not None:
        return Sample(path, "jsonl", first_line)
    return Sample(path, "object", load_whole(path))


def not_json(sample: Sample) -> FormatError:
    """The error for a text file that no text format (such as Aider's history) accepted."""
    head = str(sample.first).lstrip(_WHITESPACE + "\ufeff")[:1]
    return FormatError(
        f"{sample.path} is not JSON or JSONL (it starts with {head!r}) nor a known text "
        "transcript; pass a .json or .jsonl file",
        path=str(sample.path),
    )


def _head_text(path: Path, chars: int = 4096) -> str:
    with _open(path) as handle:
        return _read(handle, chars, path)


def load_whole(path: Path) -> Any:
    """Parse a whole (small) JSON document; for top-level objects, which cannot be streamed."""
    with _open(path) as handle:
        text = _read(handle, -1, path)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise _decode_error(path, exc, exc.lineno, truncated=_at_end(text, exc.pos)) from exc


def iter_jsonl(path: Path) -> Iterator[Any]:
    """Yield the value of each non-blank line of a JSONL file."""
    with _open(path) as handle:
        lineno = 0
        while True:
            line = _readline(handle, path)
            if not line:
                return
            lineno += 1
            if not line.strip():
                continue
            try:
                yield loads(line)
            except json.JSONDecodeError as exc:
                raise FormatError(
                    f"{path} line {lineno} is not valid JSON ({exc.msg}, column {exc.colno})"
                    f"{'; the file looks truncated' if not line.endswith(chr(10)) else ''}",
                    path=str(path),
                ) from exc


def iter_array(path: Path, *, chunk_chars: int = CHUNK_CHARS) -> Iterator[Any]:
    """Yield the elements of the top-level JSON array in ``path``, one at a time."""
    with _open(path) as handle:
        yield from _ArrayStream(handle, path, chunk_chars).elements()


class _ArrayStream:
    """A cursor over a text stream holding one JSON array; decodes element by element."""

    def __init__(self, handle: TextIO, path: Path, chunk_chars: int) -> None:
        self.handle = handle
        self.path = path
        self.chunk = chunk_chars
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.lines_dropped = 0

    def elements(self) -> Iterator[Any]:
        if self._next_char() != "[":
            raise FormatError(f"{self.path} does not start with a JSON array", path=str(self.path))
        self.pos += 1
        if self._next_char() == "]":
            self.pos += 1
            self._expect_end()
            return
        while True:
            yield self._decode_element()
            sep = self._next_char()
            if sep == "]":
                self.pos += 1
                self._expect_end()
                return
            if sep != ",":
                self._fail_separator(sep)
            self.pos += 1

    def _decode_element(self) -> Any:
        self._next_char()
        while True:
            try:
                value, end = _decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise self._error(exc) from exc
                self._more(max(self.chunk, len(self.buf) - self.pos))
                continue
            if not self.eof and not self.buf[end : end + 64].strip(_NUMBER_CHARS):
                # A number cut at the chunk edge ("12" of "123", "0" of "0.5") decodes
                # "successfully"; see what follows before trusting it.
                self._more(self.chunk)
                continue
            self.pos = end
            self._compact()
            return value

    def _next_char(self) -> str:
        """Skip whitespace and return the next character ('' at end of file) without eating it."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self._more(self.chunk)

    def _more(self, size: int) -> None:
        data = _read(self.handle, size, self.path)
        if not data:
            self.eof = True
        self.buf += data

    def _compact(self) -> None:
        if self.pos > self.chunk:
            self.lines_dropped += self.buf.count("\n", 0, self.pos)
            self.buf = self.buf[self.pos :]
            self.pos = 0

    def _line(self, pos: int) -> int:
        return self.lines_dropped + self.buf.count("\n", 0, pos) + 1

    def _expect_end(self) -> None:
        tail = self._next_char()
        if tail:
            raise FormatError(
                f"{self.path} has extra data after the JSON array (line {self._line(self.pos)}); "
                "is it JSONL with one record per line? Remove the trailing text",
                path=str(self.path),
            )

    def _fail_separator(self, sep: str) -> None:
        line = self._line(self.pos)
        if not sep:
            raise FormatError(
                f"{self.path} ends before its JSON array is closed (line {line}): the file looks "
                "truncated; re-download or re-export it",
                path=str(self.path),
            )
        raise FormatError(
            f"{self.path} is not valid JSON: expected ',' or ']' at line {line}, found {sep!r}",
            path=str(self.path),
        )

    def _error(self, exc: json.JSONDecodeError) -> FormatError:
        return _decode_error(
            self.path, exc, self._line(exc.pos), truncated=_at_end(self.buf, exc.pos)
        )


def _decode_error(
    path: Path, exc: json.JSONDecodeError, line: int, *, truncated: bool
) -> FormatError:
    if truncated:
        return FormatError(
            f"{path} ends in the middle of a JSON value (line {line}): the file looks "
            "truncated; re-download or re-export it",
            path=str(path),
        )
    return FormatError(
        f"{path} is not valid JSON: {exc.msg} at line {line}, column {exc.colno}",
        path=str(path),
    )


def _at_end(text: str, pos: int) -> bool:
    # The decoder stopped at the end of the data, or inside a string that never closes.
    rest = text[pos:]
    return not rest.strip() or (rest.startswith('"') and '"' not in rest[1:])


def _first_char(path: Path) -> str:
    with _open(path) as handle:
        while True:
            data = _read(handle, 4096, path)
            if not data:
                raise FormatError(f"{path} is empty: nothing to import", path=str(path))
            stripped = data.lstrip(_WHITESPACE + "\ufeff")
            if stripped:
                return stripped[0]


def _first_line_value(path: Path) -> Any | None:
    """Return the first line's value if the file is JSONL (or one line of JSON), else None."""
    with _open(path) as handle:
        line = _readline(handle, path)
        while line and not line.strip():
            line = _readline(handle, path)
    try:
        return loads(line)
    except json.JSONDecodeError:
        return None


def _open(path: Path) -> TextIO:
    try:
        # utf-8-sig: a byte-order mark is tolerated and dropped, anything else must be UTF-8.
        return path.open("r", encoding="utf-8-sig", errors="strict", newline="")
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc


def _read(handle: TextIO, size: int, path: Path) -> str:
    try:
        return handle.read(size)
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from exc
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc


def _readline(handle: TextIO, path: Path) -> str:
    try:
        return handle.readline()
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from exc
    except OSError as exc:
        raise FormatError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> FormatError:
    where = _first_bad_byte(path)
    at = f"at byte {where[0]}, line {where[1]}" if where else "in a read block"
    return FormatError(
        f"{path} is not UTF-8 text ({exc.reason} {at}); convert it to UTF-8 first",
        path=str(path),
    )


def _first_bad_byte(path: Path, block: int = 1 << 16) -> tuple[int, int] | None:
    """Return (byte offset, 1-based line) of the first byte that is not UTF-8, if any."""
    # The text layer reports positions inside its own read buffer; find the file position.
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    offset, newlines = 0, 0  # bytes and newlines before ``pending + data``
    try:
        with path.open("rb") as raw:
            while True:
                data = raw.read(block)
                pending = decoder.getstate()[0]
                buffer = pending + data
                try:
                    decoder.decode(data, final=not data)
                except UnicodeDecodeError as exc:
                    return offset + exc.start, newlines + buffer[: exc.start].count(b"\n") + 1
                if not data:
                    return None
                offset += len(buffer) - len(decoder.getstate()[0])
                newlines += data.count(b"\n")
    except OSError:
        return None
