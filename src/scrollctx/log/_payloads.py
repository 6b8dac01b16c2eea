"""Content-addressed storage for large event payloads, and the lazy handles that read them.

A payload is written (temp file, fsync, atomic rename) *before* the row that references it is
committed, so a committed row never points at a file that was not fully written. Files are named
by the sha256 of their bytes, so writing the same payload twice stores it once. A file deleted
behind the log's back is reported as :class:`~scrollctx.errors.PayloadMissing`, never as an
empty result; a full disk as a :class:`~scrollctx.errors.StoreError` saying so (the append
that needed the file then writes nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrollctx.errors import PayloadMissing
from scrollctx.log._failures import payload_write_error

if TYPE_CHECKING:
    from scrollctx.log._events import Event

__all__ = [
    "DEFAULT_THRESHOLD",
    "PREVIEW_CHARS",
    "ArtifactRef",
    "PayloadStore",
    "Payloads",
    "ToolResultRef",
    "full_text",
    "payload_ref",
]

DEFAULT_THRESHOLD = 16 * 1024
"""Content above this many UTF-8 bytes is externalized."""

PREVIEW_CHARS = 2000
"""How much of an externalized payload the row keeps inline as its preview."""


class Payloads(Protocol):
    """Where a backend keeps payloads: content-addressed by sha256, written before their rows."""

    def put(self, data: bytes) -> str: ...
    def get(self, sha256: str, *, seq: int | None = None) -> bytes: ...
    def has(self, sha256: str) -> bool: ...


class PayloadStore:
    """A folder of payload files named ``ab/cdef…`` by the sha256 of their content."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        """Return where the payload with this digest lives (whether or not it exists)."""
        return self.root / sha256[:2] / sha256[2:]

    def has(self, sha256: str) -> bool:
        """Return whether the payload with this digest is stored."""
        return self.path_for(sha256).is_file()

    def put(self, data: bytes) -> str:
        """Store ``data`` durably and return its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path_for(digest)
        if target.exists():
            return digest
        import tempfile  # writers only: readers (`scroll search`, ms) never load it

        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        except OSError as exc:
            raise payload_write_error(self.root, len(data), exc) from exc
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise payload_write_error(self.root, len(data), exc) from exc
            raise
        return digest

    def get(self, sha256: str, *, seq: int | None = None) -> bytes:
        """Return the payload's bytes; raise :class:`PayloadMissing` if the file is gone."""
        path = self.path_for(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            where = f" for seq {seq}" if seq is not None else ""
            raise PayloadMissing(
                f"payload {sha256[:12]}…{where} is missing from {self.root} "
                "(the file was deleted or the store was copied without its payloads/ folder)",
                seq=seq,
                sha256=sha256,
            ) from exc
        if hashlib.sha256(data).hexdigest() != sha256:
            raise PayloadMissing(
                f"payload {sha256[:12]}… at {path} does not match its digest (corrupt file)",
                seq=seq,
                sha256=sha256,
            )
        return data


def preview_of(text: str, size: int) -> str:
    """Return the bounded inline preview kept in the row of an externalized payload."""
    head = text[:PREVIEW_CHARS]
    hidden = len(text) - len(head)
    return f"{head}\n[… {hidden} more chars ({size} bytes in all) externalized; ms.expand this seq]"


@dataclass(frozen=True, slots=True)
class _PayloadRef:
    """A lazy handle on an externalized payload: cheap to hold, read on demand."""

    seq: int
    sha256: str
    size: int
    preview: str
    store: Payloads

    def text(self) -> str:
        """Read the whole payload as text."""
        return self.store.get(self.sha256, seq=self.seq).decode("utf-8")

    def json(self) -> Any:
        """Read the whole payload and parse it as JSON."""
        return json.loads(self.text())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seq={self.seq}, size={self.size})"


class ToolResultRef(_PayloadRef):
    """A lazy handle on a large tool result."""

    __slots__ = ()


class ArtifactRef(_PayloadRef):
    """A lazy handle on any other large payload (a generated file, an imported document)."""

    __slots__ = ()


def full_text(event: Event, payloads: Payloads) -> str:
    """Return the event's whole content, reading its externalized payload if it has one."""
    if event.payload_sha256 is None:
        return event.content
    return payloads.get(event.payload_sha256, seq=event.seq).decode("utf-8")


def payload_ref(event: Event, payloads: Payloads) -> ToolResultRef | ArtifactRef | None:
    """Return a lazy handle on the event's externalized payload, or ``None`` if inline."""
    if event.payload_sha256 is None or event.payload_size is None:
        return None
    ref_type = ToolResultRef if event.kind == "tool_result" else ArtifactRef
    return ref_type(event.seq, event.payload_sha256, event.payload_size, event.content, payloads)
