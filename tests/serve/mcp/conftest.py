"""Fixtures for the MCP server tests: the SDK's own client against a real ``scroll mcp``.

Without the ``mcp`` extra these tests are not collected (locally) or fail (CI installs it).
"""

from __future__ import annotations

import pytest

from needs import extra_missing

if extra_missing("mcp", "mcp"):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on anyio; the tests use its asyncio backend."""
    return "asyncio"
