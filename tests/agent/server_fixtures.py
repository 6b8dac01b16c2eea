"""The scripted provider servers (test doubles) as pytest fixtures, shared by the test folders.

One server per session and folder, started in a thread, reset before each test; a test that
leaves a queued reply unserved fails, because a script the code never consumed means the code
did not do what the test expected. Conftests import these fixtures by name.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer, serve

__all__ = [
    "_anthropic_server_session",
    "_openai_server_session",
    "anthropic_server",
    "openai_server",
]


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[ScriptedOpenAIServer]:
    server = serve(ScriptedOpenAIServer)
    assert isinstance(server, ScriptedOpenAIServer)
    yield server
    server.stop()


@pytest.fixture
def openai_server(_openai_server_session: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    """The session's ScriptedOpenAIServer, emptied for this test."""
    _openai_server_session.reset()
    yield _openai_server_session
    assert _openai_server_session.pending == 0, "scripted replies were left unserved"


@pytest.fixture(scope="session")
def _anthropic_server_session() -> Iterator[ScriptedAnthropicServer]:
    server = serve(ScriptedAnthropicServer)
    assert isinstance(server, ScriptedAnthropicServer)
    yield server
    server.stop()


@pytest.fixture
def anthropic_server(
    _anthropic_server_session: ScriptedAnthropicServer,
) -> Iterator[ScriptedAnthropicServer]:
    """The session's ScriptedAnthropicServer, emptied for this test."""
    _anthropic_server_session.reset()
    yield _anthropic_server_session
    assert _anthropic_server_session.pending == 0, "scripted replies were left unserved"
