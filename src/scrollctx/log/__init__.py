"""The Event Log: the lossless, append-only history of every agent session, and its payloads."""

from typing import TYPE_CHECKING

from scrollctx._lazy import lazy_exports

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
    "storable_text",
    "stored_checksum",
    "stored_size",
    "synced_local_file",
    "tolerant_text",
    "unsafe_characters",
    "utc_now_iso",
    "verify_event",
]

if TYPE_CHECKING:
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
    from scrollctx.log._rows import storable_text, stored_size
    from scrollctx.log._store import EventLog
    from scrollctx.log._text import extractive_label, split_prose_code
    from scrollctx.log._unsafe import (
        UNSAFE_CATEGORIES,
        escape_character,
        escape_unsafe,
        unsafe_characters,
    )
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "ArtifactRef": "scrollctx.log._payloads",
            "CHECKSUM_COLUMNS": "scrollctx.log._integrity",
            "CopyResult": "scrollctx.log._copy",
            "DEFAULT_THRESHOLD": "scrollctx.log._payloads",
            "Damage": "scrollctx.log._check",
            "Event": "scrollctx.log._events",
            "EventLog": "scrollctx.log._store",
            "EventStore": "scrollctx.log._base",
            "Kind": "scrollctx.log._events",
            "NewEvent": "scrollctx.log._events",
            "PREVIEW_CHARS": "scrollctx.log._payloads",
            "PayloadStore": "scrollctx.log._payloads",
            "Payloads": "scrollctx.log._payloads",
            "StoreCheck": "scrollctx.log._check",
            "ToolResultRef": "scrollctx.log._payloads",
            "UNSAFE_CATEGORIES": "scrollctx.log._unsafe",
            "check_configured_store": "scrollctx.log._open",
            "check_store": "scrollctx.log._check",
            "copy_log": "scrollctx.log._copy",
            "escape_character": "scrollctx.log._unsafe",
            "escape_unsafe": "scrollctx.log._unsafe",
            "event_checksum": "scrollctx.log._integrity",
            "extractive_label": "scrollctx.log._text",
            "fetch_rows": "scrollctx.log._integrity",
            "is_undecodable": "scrollctx.log._integrity",
            "known_failure": "scrollctx.log._failures",
            "log_digest": "scrollctx.log._copy",
            "needs_upgrade": "scrollctx.log._check",
            "open_existing_store": "scrollctx.log._open",
            "open_store": "scrollctx.log._open",
            "shared_store_facts": "scrollctx.log._open",
            "split_prose_code": "scrollctx.log._text",
            "storable_text": "scrollctx.log._rows",
            "stored_checksum": "scrollctx.log._integrity",
            "stored_size": "scrollctx.log._rows",
            "synced_local_file": "scrollctx.log._open",
            "tolerant_text": "scrollctx.log._integrity",
            "unsafe_characters": "scrollctx.log._unsafe",
            "utc_now_iso": "scrollctx.log._events",
            "verify_event": "scrollctx.log._integrity",
        },
    )
