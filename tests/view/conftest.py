"""Fixtures for the view tests: Event Logs on a memory-backed file system when there is one.

The files are real SQLite files opened through ``EventLog.open``; placing them on tmpfs only
makes each commit's fsync cheap, so the property tests can append thousands of events quickly.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollctx.log import EventLog

_SHM = Path("/dev/shm")


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh folder on tmpfs if available, else under tmp_path; removed afterwards."""
    if _SHM.is_dir():
        folder = Path(tempfile.mkdtemp(prefix="scroll-view-", dir=_SHM))
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture
def view_log(fast_dir: Path) -> Iterator[EventLog]:
    """A real Event Log file for view tests."""
    log = EventLog.open(fast_dir / "history.db")
    yield log
    log.close()
