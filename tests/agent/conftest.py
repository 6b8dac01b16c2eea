"""Fixtures for agent tests: the scripted provider servers and a no-wait retry policy.

The servers are test doubles (``scripted_servers.py``), shared as fixtures from
``server_fixtures.py``; a test that leaves a queued reply unserved fails, because a script the
code never consumed means the code did not do what the test expected. ``llama_server`` is no
double: a real llama.cpp server (``llama_server.py``).
"""

from __future__ import annotations

import random

import pytest
from llama_server import llama_server  # noqa: F401 - a real llama.cpp server, found by name
from scripted_servers import ScriptedOpenAIServer, SleepRecorder
from server_fixtures import (  # noqa: F401 - fixtures are found by name
    _anthropic_server_session,
    _openai_server_session,
    anthropic_server,
    openai_server,
)

from scrollctx.agent import Backend, RetryPolicy


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


@pytest.fixture
def scripted_backend(
    openai_server: ScriptedOpenAIServer,  # noqa: F811 - the imported fixture, by name
    fast_retry: RetryPolicy,
) -> Backend:
    """An OpenAI backend aimed at the scripted server, retrying without waiting."""
    from scrollctx.agent.backends._openai import OpenAIBackend

    return OpenAIBackend(
        model="scripted-model",
        base_url=openai_server.base_url,
        api_key="sk-scripted-test-key",
        retry=fast_retry,
    )
