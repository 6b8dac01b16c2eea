"""Fixtures for the importer tests: the folder of hand-written input files."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    """The folder of hand-written input files (LongMemEval mini, a BEAM-10M chat)."""
    return FIXTURES
