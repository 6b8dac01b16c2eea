"""Open the Event Log a :class:`~scrollctx.config.Config` names: a SQLite file or a shared URL.

The one place that chooses the backend, so every command and the library accept
``--store DIR`` and ``--store postgresql://…`` alike. The PostgreSQL backend is imported only
here and only for a URL: without the ``postgres`` extra, a folder store still works and a URL
store says which extra to install. The writer and the checker are imported by the functions that
use them too: ``scroll search`` needs only :func:`synced_local_file`, which opens nothing for a
folder store.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrollctx.config import Config
from scrollctx.errors import MissingDependency, StoreError, UsageError

if TYPE_CHECKING:
    from scrollctx.log._base import EventStore
    from scrollctx.log._check import StoreCheck
    from scrollctx.log._postgres import PostgresEventStore

__all__ = [
    "check_configured_store",
    "open_existing_store",
    "open_store",
    "shared_store_facts",
    "synced_local_file",
]


def open_store(config: Config, **options: Any) -> EventStore:
    """Open (creating if needed) the store ``config`` names; ``options`` go to its backend."""
    if config.store_url is None:
        from scrollctx.log._store import EventLog

        return EventLog.open(config.db_path, **options)
    return _open_shared(config, **options)


def check_configured_store(
    config: Config, *, full: bool = False
) -> tuple[StoreCheck, dict[str, Any] | None]:
    """Check the whole store read-only; for a shared one also return :func:`shared_store_facts`.
    ``full`` adds SQLite's ``integrity_check`` for a folder's store (a shared one's server keeps
    its own pages).

    A shared store's local replica is a cache: its payload files that are gone or damaged are
    fetched again (``payloads_restored`` in the replica's facts); the shared log is only read.
    """
    if config.store_url is None:
        from scrollctx.log._check import check_store

        return check_store(config.db_path, full=full), None
    if full:  # said, not skipped: the check asked for would otherwise pass unrun
        raise UsageError(
            "--full runs SQLite's integrity_check on a folder's store; a shared store's server "
            "checks its own pages. Leave out --full (the checksums and payloads are checked)"
        )
    from scrollctx.log._postgres_check import shared_facts, verify_shared

    with _open_shared(config) as store:
        report, facts = verify_shared(store), shared_facts(store)
        facts["replica"]["payloads_restored"] = store.replica.restore_payloads()
        return report, facts


def shared_store_facts(config: Config) -> dict[str, Any] | None:
    """Return the server, migrations and replica lag of a shared store (None: a folder store)."""
    if config.store_url is None:
        return None
    from scrollctx.log._postgres_check import shared_facts

    with _open_shared(config) as store:
        return shared_facts(store)


def _open_shared(config: Config, **options: Any) -> PostgresEventStore:
    if config.store_url is None:
        raise StoreError(f"{config.store_label} is not a shared store")
    try:
        from scrollctx.log._postgres import PostgresEventStore
    except ImportError as exc:
        raise MissingDependency("psycopg (for a postgresql:// store)", "postgres") from exc
    return PostgresEventStore.open(config.store_url, replica_path=config.db_path, **options)


def open_existing_store(config: Config, **options: Any) -> EventStore:
    """Open the store ``config`` names, but never create a folder store that is not there."""
    _require_folder_store(config)
    return open_store(config, **options)


def synced_local_file(config: Config) -> Path:
    """Return the SQLite file ``ms`` reads for this store, up to date (a replica is synced).

    A folder store is not even opened for writing: its file is the store.
    """
    _require_folder_store(config)
    if config.store_url is None:
        return config.db_path
    with open_store(config) as store:
        store.refresh()
        return store.path


def _require_folder_store(config: Config) -> None:
    if config.store_url is None and not config.db_path.is_file():
        raise StoreError(
            f"no store at {config.store_dir} (no {config.db_path.name}); "
            f"run `scroll ingest FILE --store {config.store_dir}` first"
        )
