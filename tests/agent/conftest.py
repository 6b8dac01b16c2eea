"""Fixtures for agent tests: scripted provider servers on loopback and a no-wait retry policy.

The servers are test doubles (see ``scripted_servers.py``): one per session, started in a
thread, reset before each test; a test that leaves a queued reply unserved fails, because a
script the code never consumed means the code did not do what the test expected.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer, SleepRecorder, serve

from scrollctx.agent import RetryPolicy


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


@pytest.fixture
def sleeps() -> SleepRecorder:
    """The waits a retry policy asked for, in order."""
    return SleepRecorder()


@pytest.fixture
def fast_retry(sleeps: SleepRecorder) -> RetryPolicy:
    """Four attempts, real backoff arithmetic, no real waiting (waits land in ``sleeps``)."""
    return RetryPolicy(
        max_attempts=4, base_delay=1.0, max_delay=30.0, sleep=sleeps, rng=random.Random(7)
    )
