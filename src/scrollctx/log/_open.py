"""Open the Event Log a :class:`~scrollctx.config.Config` names: a SQLite file or a shared URL.

The one place that chooses the backend, so every command and the library accept
``--store DIR`` and ``--store postgresql://…`` alike. The PostgreSQL backend is imported only
here and only for a URL: without the ``postgres`` extra, a folder store still works and a URL
store says which extra to install.
"""

from __future__ import annotations

from typing import Any

from scrollctx.config import Config
from scrollctx.errors import MissingDependency
from scrollctx.log._base import EventStore
from scrollctx.log._store import EventLog

__all__ = ["open_store"]


def open_store(config: Config, **options: Any) -> EventStore:
    """Open (creating if needed) the store ``config`` names; ``options`` go to its backend."""
    if config.store_url is None:
        return EventLog.open(config.db_path, **options)
    try:
        from scrollctx.log._postgres import PostgresEventStore
    except ImportError as exc:
        raise MissingDependency("psycopg (for a postgresql:// store)", "postgres") from exc
    return PostgresEventStore.open(config.store_url, replica_path=config.db_path, **options)
