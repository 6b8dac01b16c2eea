"""The Event Log: the lossless, append-only history of every agent session, and its payloads."""

from scrollctx.log._base import EventStore
from scrollctx.log._events import Event, Kind, NewEvent, utc_now_iso
from scrollctx.log._payloads import (
    DEFAULT_THRESHOLD,
    PREVIEW_CHARS,
    ArtifactRef,
    PayloadStore,
    ToolResultRef,
)
from scrollctx.log._store import EventLog
from scrollctx.log._text import extractive_label, split_prose_code

__all__ = [
    "ArtifactRef",
    "DEFAULT_THRESHOLD",
    "Event",
    "EventLog",
    "EventStore",
    "Kind",
    "NewEvent",
    "PREVIEW_CHARS",
    "PayloadStore",
    "ToolResultRef",
    "extractive_label",
    "split_prose_code",
    "utc_now_iso",
]
