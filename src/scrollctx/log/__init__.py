"""The Event Log: the lossless, append-only history of every agent session, and its payloads."""

from scrollctx.log._base import EventStore
from scrollctx.log._check import Damage, StoreCheck, check_store, needs_upgrade
from scrollctx.log._copy import CopyResult, copy_log, log_digest
from scrollctx.log._events import Event, Kind, NewEvent, utc_now_iso
from scrollctx.log._failures import known_failure
from scrollctx.log._integrity import (
    CHECKSUM_COLUMNS,
    event_checksum,
    fetch_rows,
    is_undecodable,
    stored_checksum,
    tolerant_text,
    verify_event,
)
from scrollctx.log._open import (
    check_configured_store,
    open_existing_store,
    open_store,
    shared_store_facts,
    synced_local_file,
)
from scrollctx.log._payloads import (
    DEFAULT_THRESHOLD,
    PREVIEW_CHARS,
    ArtifactRef,
    Payloads,
    PayloadStore,
    ToolResultRef,
)
from scrollctx.log._store import EventLog
from scrollctx.log._text import extractive_label, split_prose_code
from scrollctx.log._unsafe import (
    UNSAFE_CATEGORIES,
    escape_character,
    escape_unsafe,
    unsafe_characters,
)

__all__ = [
    "ArtifactRef",
    "CHECKSUM_COLUMNS",
    "CopyResult",
    "DEFAULT_THRESHOLD",
    "Damage",
    "Event",
    "EventLog",
    "EventStore",
    "Kind",
    "NewEvent",
    "PREVIEW_CHARS",
    "PayloadStore",
    "Payloads",
    "StoreCheck",
    "ToolResultRef",
    "UNSAFE_CATEGORIES",
    "check_configured_store",
    "check_store",
    "copy_log",
    "escape_character",
    "escape_unsafe",
    "event_checksum",
    "extractive_label",
    "fetch_rows",
    "is_undecodable",
    "known_failure",
    "log_digest",
    "needs_upgrade",
    "open_existing_store",
    "open_store",
    "shared_store_facts",
    "split_prose_code",
    "stored_checksum",
    "synced_local_file",
    "tolerant_text",
    "unsafe_characters",
    "utc_now_iso",
    "verify_event",
]
