"""Shared fixtures: every test gets a clean environment and real store files under tmp_path."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from needs import IN_CI, missing, pytest_runtest_makereport  # noqa: F401 - the CI hook
from postgres_server import postgres_server, postgres_url  # noqa: F401 - fixtures, by name
from scrollctx.log import EventLog
from scrollctx.surface import Encoder

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
BEAM_CHAT = ("beam", "chats", "100K", "1")


def pytest_report_header() -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        fts5 = "yes"
    except sqlite3.OperationalError:
        fts5 = "no"
    return [
        f"sqlite: {sqlite3.sqlite_version}, fts5: {fts5}",
        f"shared data: {SHARED_DATA}",
        f"missing prerequisites: {'fail (SCROLL_CI=1)' if IN_CI else 'skip'}",
    ]


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Clear SCROLL_* and provider variables and point HOME at a temp folder."""
    import os

    for name in list(os.environ):
        if name.startswith(("SCROLL_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh, empty store folder."""
    path = tmp_path / "store"
    path.mkdir()
    return path


@pytest.fixture
def event_log(store_dir: Path) -> Iterator[EventLog]:
    """A real Event Log file, migrated, closed after the test."""
    log = EventLog.open(store_dir / "history.db")
    yield log
    log.close()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The benchmark data shipped beside the repo (never copied into it)."""
    if not SHARED_DATA.is_dir():
        missing(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def transcripts(shared_data: Path) -> Path:
    """The real agent transcripts in ../shared/data/transcripts (see its SOURCES.md)."""
    return shared_data / "transcripts"


@pytest.fixture(scope="session")
def semantic_encoder() -> Encoder:
    """The semantic channel's encoder, loaded once per session (needs the semantic extra)."""
    from needs import import_or_missing

    for name in ("numpy", "onnxruntime", "tokenizers"):
        import_or_missing(name)
    from scrollctx.errors import MissingDependency
    from scrollctx.surface import load_encoder

    try:
        return load_encoder()
    except MissingDependency as exc:
        missing(str(exc))


@pytest.fixture(scope="session")
def _beam_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with BEAM 100K chat 1 ingested once per session (copied per test)."""
    from scrollctx.ingest import ingest_path

    chat = SHARED_DATA.joinpath(*BEAM_CHAT)
    if not chat.is_dir():
        missing(f"shared data not found at {chat}")
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
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs mounted at a fresh folder, unmounted after the test (root only)."""
    import os
    import subprocess

    if os.geteuid() != 0:
        missing("mounting a small tmpfs to fill needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
