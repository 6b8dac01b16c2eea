"""A team on one ``postgresql://`` URL: copies both ways, the same hits, two hosts, diagnostics.

A real PostgreSQL server (``postgres_server``), real SQLite stores, the real BEAM data, and
``scroll`` run in-process or as separate processes (one per "host", each with its own
``SCROLL_LOCAL_DIR``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from needs import import_or_missing
from scrollctx.cli import run
from scrollctx.config import resolve_config
from scrollctx.log import EventLog, Kind, NewEvent, log_digest, open_store
from scrollctx.surface import open_surface

Capture = pytest.CaptureFixture[str]
QUERIES = ["sprint deadline", "budget OR cost", '"project plan"', "meet*", "python error"]


@pytest.fixture(scope="module")
def beam_store(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """BEAM 100K chat 1 in a SQLite store, long turns externalized (threshold 2 KiB)."""
    from scrollctx.ingest import ingest_path

    store = tmp_path_factory.mktemp("beam") / "store"
    with EventLog.open(store / "history.db", payload_threshold=2048) as log:
        ingest_path(log, shared_data / "beam" / "chats" / "100K" / "1")
        externalized = log.execute(
            "SELECT count(*) FROM conversation_history WHERE payload_sha256 IS NOT NULL"
        )[0][0]
    assert externalized > 10
    return store


def _hits(db_path: Path) -> list[list[tuple[int, str]]]:
    with open_surface(db_path) as ms:
        return [[(h["seq"], h["snippet"]) for h in ms.search(q, k=8)] for q in QUERIES]


def test_copy_to_postgres_and_back_is_lossless_and_searches_the_same(
    beam_store: Path,
    postgres_url: str,
    tmp_path: Path,
    capsys: Capture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import_or_missing("psycopg")
    monkeypatch.setenv("SCROLL_LOCAL_DIR", str(tmp_path / "host"))
    back = tmp_path / "back"
    assert run(["store", "copy", str(beam_store), postgres_url, "--json"]) == 0
    there = json.loads(capsys.readouterr().out)
    assert run(["store", "copy", postgres_url, str(back), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert there["copied"] == again["copied"] == there["events"] > 100
    assert there["digest"] == again["digest"]
    with EventLog.open(beam_store / "history.db") as original:
        assert log_digest(original)[0] == there["digest"]
    with EventLog.open(back / "history.db") as copy:
        assert log_digest(copy)[0] == there["digest"]
    shared = resolve_config(postgres_url)
    with open_store(shared) as store:
        store.refresh()
    assert _hits(shared.db_path) == _hits(beam_store / "history.db") == _hits(back / "history.db")


def test_copy_resumes_after_what_the_target_holds_and_refuses_a_stranger(
    tmp_path: Path, postgres_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_or_missing("psycopg")
    monkeypatch.setenv("SCROLL_LOCAL_DIR", str(tmp_path / "host"))
    source = tmp_path / "source"
    with EventLog.open(source / "history.db") as log:
        log.append_many(_turn(f"first part {i}") for i in range(30))
    assert run(["store", "copy", str(source), postgres_url]) == 0
    assert "copied 30 events; both stores hold 30" in capsys.readouterr().out
    with EventLog.open(source / "history.db") as log:
        log.append_many(_turn(f"second part {i}") for i in range(20))
    assert run(["store", "copy", str(source), postgres_url, "--json"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert (resumed["copied"], resumed["resumed_after"], resumed["events"]) == (20, 30, 50)
    stranger = tmp_path / "stranger"
    with EventLog.open(stranger / "history.db") as log:
        log.append(_turn("not from that source"))
    assert run(["store", "copy", postgres_url, str(stranger)]) == 2
    assert "not the source's" in capsys.readouterr().err


def test_stats_and_doctor_describe_a_shared_store(
    tmp_path: Path, postgres_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_or_missing("psycopg")
    monkeypatch.setenv("SCROLL_LOCAL_DIR", str(tmp_path / "host"))
    with open_store(resolve_config(postgres_url)) as store:
        store.append_many([_turn("one"), _turn("two" * 10_000)])
    assert run(["doctor", "--store", postgres_url, "--json"]) == 0
    doctor = json.loads(capsys.readouterr().out)
    assert doctor["store"]["ok"] and doctor["store"]["events"] == 2
    assert doctor["shared"]["migrations_pending"] == [] and doctor["shared"]["replica"]["lag"] == 2
    assert "admin-secret" not in json.dumps(doctor)
    assert run(["stats", "--store", postgres_url, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["events"] == 2 and stats["shared"]["last_seq"] == 2
    assert stats["shared"]["replica"]["lag"] == 0  # stats read through the synced replica
    assert run(["stats", "--store", postgres_url]) == 0
    assert "replica" in capsys.readouterr().out


def test_doctor_restores_replica_payload_files_that_are_gone_or_damaged(
    tmp_path: Path, postgres_url: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sync fetches only new rows' payloads and a rebuild keeps payload files: nothing else
    # would ever mend one, and ms would serve the stored preview for good.
    import_or_missing("psycopg")
    monkeypatch.setenv("SCROLL_LOCAL_DIR", str(tmp_path / "host"))
    config = resolve_config(postgres_url)
    big = ["one long tool output\n" * 5000, "another long output\n" * 5000]
    with open_store(config) as store:
        seqs = store.append_many(
            [NewEvent(session_id="s", kind=Kind.TOOL_RESULT, content=text) for text in big]
        )
        store.refresh()
        local = EventLog.open_read_only(config.db_path)
        files = [local.payloads.path_for(str(e.payload_sha256)) for e in local.events(seqs)]
        local.close()
    files[0].write_bytes(files[0].read_bytes()[:-1] + b"!")
    files[1].unlink()
    assert run(["doctor", "--store", postgres_url]) == 0
    assert "; 2 payload files restored from the shared store" in capsys.readouterr().out
    with open_surface(config.db_path) as ms:
        assert [row["content"] for row in ms.expand(seqs[0], seqs[1])] == big
    assert run(["doctor", "--store", postgres_url]) == 0
    assert "restored" not in capsys.readouterr().out  # nothing left to restore


@pytest.mark.parametrize("command", [["embed"], ["ingest", "--embed", "."]])
def test_vectors_need_a_folder_store_and_say_so(command: list[str], capsys: Capture) -> None:
    url = "postgresql://writer@127.0.0.1:1/team"  # refused before any connection is tried
    assert run([*command, "--store", url]) == 2
    assert "needs a folder store" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://writer:pw%zzcr3t@127.0.0.1:1/team", 'invalid percent-encoded token: "***"'),
        ("postgresql://writer@127.0.0.1:1/team?password=pw%zzcr3t", "percent-encoded token"),
        ("postgresql://writer:cr3t@127.0.0.1:1/team?passwrd=x", 'query parameter: "passwrd"'),
        ("postgresql://writer:pw@cr3t@127.0.0.1:1/team", "write it as %40"),
        ("postgresql://writer:cr3t@127.0.0.1:port/team", "port is not a number"),
    ],
)
def test_a_malformed_url_is_a_usage_error_that_never_shows_the_password(
    url: str, says: str, capsys: Capture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import_or_missing("psycopg")
    monkeypatch.setenv("SCROLL_LOCAL_DIR", str(tmp_path))
    for args in (["stats", "--store", url], ["store", "copy", url, str(tmp_path)]):
        assert run(args) == 2
        err = capsys.readouterr().err
        assert says in err and "cr3t" not in err, err


_HOST = """
import sys
from scrollctx.config import resolve_config
from scrollctx.log import Kind, NewEvent, open_store
with open_store(resolve_config(sys.argv[1])) as store:
    store.append(NewEvent(session_id=sys.argv[2], kind=Kind.CONVERSATION, content=sys.argv[3]))
"""


def _on_host(host: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCROLL_LOCAL_DIR": str(host)}
    return subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=host)


def test_two_hosts_each_find_the_others_events_through_ms_search(
    tmp_path: Path, postgres_url: str
) -> None:
    import_or_missing("psycopg")
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir(), beta.mkdir()
    python = sys.executable
    _on_host(alpha, python, "-c", _HOST, postgres_url, "alpha", "the ferry to Lisbon at noon")
    _on_host(beta, python, "-c", _HOST, postgres_url, "beta", "the ferry ticket costs twelve euros")
    cell = "print(sorted(h['session_id'] for h in ms.search('ferry', all_agents=True)))"
    scroll = str(Path(sys.executable).with_name("scroll"))
    for host in (alpha, beta):
        out = _on_host(host, scroll, "exec", cell, "--store", postgres_url).stdout
        assert out == "stdout:\n['alpha', 'beta']\n"
        assert list((host / "replicas").glob("*/history.db"))  # each host's own replica


def _turn(text: str) -> NewEvent:
    return NewEvent(session_id="s1", kind=Kind.USER_MESSAGE, role="user", content=text)
