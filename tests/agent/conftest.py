"""Fixtures for agent tests: scripted provider servers on loopback and a no-wait retry policy.

The servers are test doubles (see ``scripted_servers.py``): one per session, started in a
thread, reset before each test; a test that leaves a queued reply unserved fails, because a
script the code never consumed means the code did not do what the test expected.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer, SleepRecorder, serve

from scrollctx.agent import Backend, RetryPolicy


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


# -- fixtures for the agent loop tests (test_agent_*.py) -----------------------------------

BEAM_CHAT = ("beam", "chats", "100K", "1")


@pytest.fixture(scope="session")
def _beam_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with BEAM 100K chat 1 ingested once per session (copied per test)."""
    from scrollctx.ingest import ingest_path
    from scrollctx.log import EventLog

    data = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    chat = data.joinpath(*BEAM_CHAT)
    if not chat.is_dir():
        pytest.skip(f"shared data not found at {chat}")
    store = tmp_path_factory.mktemp("beam-template") / "store"
    log = EventLog.open(store / "history.db")
    try:
        ingest_path(log, chat)
    finally:
        log.close()
    return store


@pytest.fixture
def beam_store(_beam_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of a store holding BEAM 100K chat 1 (task_id beam/100K/1)."""
    target = tmp_path / "beam-store"
    shutil.copytree(_beam_template, target)
    return target


@pytest.fixture
def scripted_backend(openai_server: ScriptedOpenAIServer, fast_retry: RetryPolicy) -> Backend:
    """An OpenAI backend aimed at the scripted server, retrying without waiting."""
    from scrollctx.agent.backends._openai import OpenAIBackend

    return OpenAIBackend(
        model="scripted-model",
        base_url=openai_server.base_url,
        api_key="sk-scripted-test-key",
        retry=fast_retry,
    )
