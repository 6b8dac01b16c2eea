"""Fixtures for bench tests: the scripted OpenAI-compatible server (a test double) on loopback.

The server module lives with the agent tests; it is imported from there, not copied.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))

from bench_servers import ScriptedModelServer  # noqa: E402
from scripted_servers import serve  # noqa: E402
from server_fixtures import _openai_server_session, openai_server  # noqa: E402, F401


@pytest.fixture(scope="session")
def _model_server_session() -> Iterator[ScriptedModelServer]:
    server = serve(ScriptedModelServer)
    assert isinstance(server, ScriptedModelServer)
    yield server
    server.stop()


@pytest.fixture
def model_server(_model_server_session: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    """The session's ScriptedModelServer, reset for this test."""
    _model_server_session.reset()
    _model_server_session.respond = None
    yield _model_server_session
