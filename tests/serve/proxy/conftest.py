"""Fixtures for the proxy tests: a real ``scroll serve`` app on loopback in front of the scripted
upstream servers (test doubles for the model), driven by the real ``openai`` and ``anthropic``
SDKs.

The proxy runs in a uvicorn server on a thread of the test process, over a real SQLite store
under ``tmp_path``, with real sandboxed kernels; the scripted servers are the session's, reset
before each test (a reply left unserved fails the test). Without the ``serve`` extra these tests
are not collected (locally) or fail (CI installs it).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from needs import extra_missing

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "agent"))

from proxy_helpers import ProxyServer, upstream_backend  # noqa: E402
from scripted_servers import ScriptedAnthropicServer, ScriptedOpenAIServer  # noqa: E402
from server_fixtures import (  # noqa: E402, F401 - fixtures are found by name
    _anthropic_server_session,
    _openai_server_session,
    anthropic_server,
    openai_server,
)

if extra_missing("serve", "starlette", "uvicorn", "orjson"):
    collect_ignore_glob = ["test_*.py"]

_SHM = Path("/dev/shm")


@pytest.fixture(scope="session")
def sandbox_label() -> str:
    """The strict sandbox, checked once for the session (the proxy refuses to start without)."""
    from scrollctx.kernel import SandboxPolicy
    from scrollctx.serve.proxy import sandbox_label

    return sandbox_label(SandboxPolicy())


@pytest.fixture
def fast_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh folder on tmpfs when there is one (each commit's fsync is then cheap)."""
    if not _SHM.is_dir():
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="scroll-proxy-", dir=_SHM))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def start_proxy(tmp_path: Path, sandbox_label: str) -> Iterator[Any]:
    """Start a proxy in front of a scripted server: ``start_proxy(server, **settings)``.

    ``store=`` puts the store elsewhere (tmpfs, for tests that run no cell: the sandbox shows
    the kernel only real folders).
    """
    started: list[ProxyServer] = []

    def start(server: Any, *, backend_options: dict[str, Any] | None = None,
              store: Path | None = None, **settings: Any) -> ProxyServer:  # fmt: skip
        kind = "openai" if isinstance(server, ScriptedOpenAIServer) else "anthropic"
        store = store or tmp_path / f"store-{len(started)}"
        store.mkdir(exist_ok=True)
        backend = upstream_backend(kind, server, **(backend_options or {}))
        proxy = ProxyServer(store, backend, sandbox_label, **settings)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Opens the store a proxy logs to, again after a restart: ``open_log()``. A SQLite Event
    Log in a folder, or a shared store on the suite's PostgreSQL server (read through this
    host's local replica, as ``scroll serve --store postgresql://…`` does)."""
    from scrollctx.config import resolve_config
    from scrollctx.log import EventLog, open_store

    if request.param == "sqlite":
        (tmp_path / "kept").mkdir(exist_ok=True)
        yield lambda: EventLog.open(tmp_path / "kept" / "history.db")
        return
    url = request.getfixturevalue("postgres_url")
    local = {"SCROLL_LOCAL_DIR": str(tmp_path / "host")}
    yield lambda: open_store(resolve_config(url, environ=local))


@pytest.fixture
def openai_proxy(
    start_proxy: Any,
    openai_server: ScriptedOpenAIServer,  # noqa: F811 - the imported fixture, by name
) -> ProxyServer:
    """A proxy in front of the scripted OpenAI-compatible server."""
    return start_proxy(openai_server)  # type: ignore[no-any-return]


@pytest.fixture
def anthropic_proxy(
    start_proxy: Any,
    anthropic_server: ScriptedAnthropicServer,  # noqa: F811 - the imported fixture, by name
) -> ProxyServer:
    """A proxy in front of the scripted Anthropic server."""
    return start_proxy(anthropic_server)  # type: ignore[no-any-return]
