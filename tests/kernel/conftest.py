"""Fixtures for kernel tests: real Event Log files and real sandboxed worker processes.

Starting a worker takes about a tenth of a second, so tests that leave the namespace usable share
a module-scoped kernel; tests that kill, restart or reconfigure the worker start their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kernel_helpers import Session, open_session


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """One kernel for tests that leave it usable (short timeouts)."""
    session = open_session(tmp_path_factory.mktemp("shared"), timeout=5.0, grace=1.0)
    yield session
    session.kernel.close()
    session.log.close()


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Session]:
    """A kernel for one test (short timeout and grace, for timeouts and crashes)."""
    session = open_session(tmp_path, timeout=1.0, grace=0.5)
    yield session
    session.kernel.close()
    session.log.close()
