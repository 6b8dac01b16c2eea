"""The storage suite runs against both backends: a SQLite file and a real PostgreSQL server.

``backend`` is parametrised over ``sqlite`` and ``postgresql``; each value knows how to open a
fresh store, reach it behind the store's back (a second, raw connection), and count what only
its own storage can count. Tests that hold for every backend take ``store``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import Backend, postgres_backend, sqlite_backend

from scrollctx.log import EventStore


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """One backend: a SQLite file under tmp_path, or a fresh database on the test server."""
    if request.param == "sqlite":
        return sqlite_backend(tmp_path)
    return postgres_backend(request.getfixturevalue("postgres_url"), tmp_path)


@pytest.fixture
def store(backend: Backend) -> Iterator[EventStore]:
    """A fresh, empty store of the backend, closed after the test."""
    opened = backend.open()
    yield opened
    opened.close()
