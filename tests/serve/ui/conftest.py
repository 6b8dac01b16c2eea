"""Fixtures for the inspector's tests: one real store (see ``ui_helpers``), served by real
uvicorn on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from ui_helpers import (
    CLAUDE_FIXTURES,
    ServedApp,
    UIStore,
    agent_run,
    bench_record,
    hostile_session,
)

from needs import extra_missing, missing
from scrollctx.log import EventLog

if extra_missing("ui", "starlette", "jinja2", "uvicorn", "matplotlib"):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def ui_store(tmp_path_factory: pytest.TempPathFactory) -> UIStore:
    """The inspector's test store (see ``ui_helpers``), built once per test session."""
    from scrollctx.ingest import ingest_path

    if not CLAUDE_FIXTURES.is_dir():
        missing(f"the Claude Code fixtures are not at {CLAUDE_FIXTURES}")
    store = tmp_path_factory.mktemp("ui") / "store"
    session, requests = agent_run(store)
    with EventLog.open(store / "history.db") as log:
        ingest_path(log, CLAUDE_FIXTURES)
        big, script, escapes = hostile_session(log)
    results = store.parent / "results"
    results.mkdir()
    records = [bench_record(f"c{n % 2}#q{n}", ("summarization", "temporal")[n % 2], n % 3 / 2)
               for n in range(6)]  # fmt: skip
    (results / "beam.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return UIStore(store, session, requests, big, script, escapes, results)


@pytest.fixture(scope="session")
def served(ui_store: UIStore) -> Iterator[ServedApp]:
    """The inspector over the test store, without a token, on loopback."""
    from scrollctx.serve.ui._app import create_app

    app = ServedApp(create_app(ui_store.path / "history.db", results_dir=ui_store.results))
    yield app
    app.stop()
