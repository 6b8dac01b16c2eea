"""Fixtures for the MCP server tests: the SDK's own client against a real ``scroll mcp``.

Without the ``mcp`` extra these tests are not collected (locally) or fail (CI installs it).
"""

from __future__ import annotations

import importlib.util

import pytest

from needs import IN_CI

if importlib.util.find_spec("mcp") is None:
    if IN_CI:
        raise RuntimeError("CI must install the mcp extra: pip install -e '.[mcp]'")
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def anyio_backend() -> str:
    """The SDK runs on anyio; the tests use its asyncio backend."""
    return "asyncio"
