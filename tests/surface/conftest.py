"""Fixtures for the memory-surface tests: real SQLite stores written through EventLog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from surface_helpers import write_store

from scrollctx.surface import MemorySurface, open_surface


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared fixture store (read-only use only)."""
    return write_store(tmp_path_factory.mktemp("surface"))


@pytest.fixture
def ms(store_path: Path) -> Iterator[MemorySurface]:
    """An unbound surface over the shared store."""
    surface = open_surface(store_path)
    yield surface
    surface.close()


@pytest.fixture
def own_store(tmp_path: Path) -> Path:
    """A private fixture store the test may damage (payload files, etc.)."""
    return write_store(tmp_path)
