"""Fixtures for the importer tests: the folder of hand-written input files."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    """The folder of hand-written input files (LongMemEval mini, a BEAM-10M chat)."""
    return FIXTURES


@pytest.fixture
def transcripts(shared_data: Path) -> Path:
    """The real agent transcripts in ../shared/data/transcripts (see its SOURCES.md)."""
    return shared_data / "transcripts"
