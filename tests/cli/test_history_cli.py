"""``scroll search|expand|sql|sessions|stats``: human and JSON output, notes, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.cli import run
from scrollctx.log import EventLog, NewEvent

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def store(store_dir: Path) -> Path:
    with EventLog.open(store_dir / "history.db") as log:
        log.append_many(
            [
                NewEvent(
                    session_id="s1",
                    kind="conversation",
                    role="user",
                    step_index=1,
                    content="Plan the route, I want to avoid tolls.",
                    metadata={"date": "2024-04-01"},
                    created_at="2024-04-01T10:00:00.000000Z",
                ),
                NewEvent(
                    session_id="s1",
                    kind="conversation",
                    role="assistant",
                    step_index=1,
                    content="Google Maps can avoid tolls.",
                    created_at="2024-04-01T10:00:01.000000Z",
                ),
                NewEvent(
                    session_id="s2",
                    kind="tool_result",
                    tool_call_id="c1",
                    content="Z" * 20000,
                    created_at="2024-04-02T10:00:00.000000Z",
                ),
            ]
        )
    return store_dir


def _json(capsys: Capture) -> object:
    return json.loads(capsys.readouterr().out)


def test_search_human_and_json(store: Path, capsys: Capture) -> None:
    assert run(["search", "route tolls", "--store", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "seq 1  s1  step 1  user  2024-04-01"
    assert lines[1] == "  Plan the «route», I want to avoid «tolls»."
    assert lines[2] == "seq 2  s1  step 1  assistant  2024-04-01 (broadened)"
    assert (
        run(
            [
                "search",
                "route",
                "--k",
                "1",
                "--kind",
                "conversation",
                "--json",
                "--store",
                str(store),
            ]
        )
        == 0
    )
    (hit,) = _json(capsys)  # type: ignore[misc]
    assert hit["seq"] == 1 and hit["session_id"] == "s1" and hit["broadened"] is False
    assert run(["search", "tolls", "--session", "s2", "--json", "--store", str(store)]) == 0
    assert _json(capsys) == []


def test_search_notes_go_to_stderr(store: Path, capsys: Capture) -> None:
    assert run(["search", "", "--store", str(store), "--json"]) == 0
    out = capsys.readouterr()
    assert isinstance(json.loads(out.out), list)
    assert out.err.startswith("[note] the query has no searchable words")


def test_expand_singles_and_spans(store: Path, capsys: Capture) -> None:
    assert run(["expand", "3", "1-2", "2", "--json", "--store", str(store)]) == 0
    rows = _json(capsys)
    assert [r["seq"] for r in rows] == [1, 2, 3]  # type: ignore[union-attr,index]
    assert rows[2]["content"] == "Z" * 20000  # type: ignore[index]
    assert run(["expand", "2", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- seq 2  conversation  assistant  session s1")
    assert "Google Maps can avoid tolls." in out


def test_expand_rejects_bad_seqs(store: Path, capsys: Capture) -> None:
    assert run(["expand", "1-x", "--store", str(store)]) == 2
    assert "not a seq or a LO-HI span" in capsys.readouterr().err


def test_sql_table_json_and_errors(store: Path, capsys: Capture) -> None:
    query = "SELECT seq, role FROM hist.conversation_history WHERE kind = 'conversation'"
    assert run(["sql", query, "--store", str(store)]) == 0
    assert capsys.readouterr().out.splitlines() == ["seq  role", "1    user", "2    assistant"]
    assert run(["sql", query, "--json", "--store", str(store)]) == 0
    assert _json(capsys) == [{"seq": 1, "role": "user"}, {"seq": 2, "role": "assistant"}]
    assert run(["sql", "SELECT 1 WHERE 0", "--json", "--store", str(store)]) == 0
    assert _json(capsys) == []
    assert (
        run(["sql", "DELETE FROM hist.conversation_history", "--json", "--store", str(store)]) == 2
    )
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["type"] == "QueryError" and "read-only" in error["message"]


def test_sessions(store: Path, capsys: Capture) -> None:
    assert run(["sessions", "--json", "--store", str(store)]) == 0
    rows = _json(capsys)
    assert [(r["session_id"], r["events"]) for r in rows] == [("s1", 2), ("s2", 1)]  # type: ignore[union-attr,index]
    assert run(["sessions", "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith("session_id")


def test_stats(store: Path, capsys: Capture) -> None:
    assert run(["stats", "--json", "--store", str(store)]) == 0
    data = _json(capsys)
    assert data["events"] == 3 and data["sessions"] == 2 and data["last_seq"] == 3  # type: ignore[index]
    assert data["kinds"] == {"conversation": 2, "tool_result": 1}  # type: ignore[index]
    assert data["fts5"] is True and data["payload_files"] == 1  # type: ignore[index]
    assert data["payload_bytes"] == 20000 and data["db_bytes"] > 0  # type: ignore[index]
    assert run(["stats", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "fts5           yes" in out and "conversation         2" in out


@pytest.mark.parametrize(
    "args", [["search", "x"], ["expand", "1"], ["sql", "SELECT 1"], ["sessions"], ["stats"]]
)
def test_a_missing_store_is_a_clear_error_and_stays_missing(
    tmp_path: Path, capsys: Capture, args: list[str]
) -> None:
    store = tmp_path / "absent"
    assert run([*args, "--store", str(store)]) == 1
    assert "run `scroll ingest" in capsys.readouterr().err
    assert not store.exists()


def test_console_script(store: Path) -> None:
    script = Path(sys.executable).with_name("scroll")
    done = subprocess.run(
        [str(script), "search", "route tolls", "--json", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [h["seq"] for h in json.loads(done.stdout)] == [1, 2]


def test_expand_reports_a_deleted_payload_as_missing_never_empty(
    store: Path, capsys: Capture
) -> None:
    with EventLog.open(store / "history.db") as log:
        event = log.get(3)
        assert event.payload_sha256 is not None
        log.payloads.path_for(event.payload_sha256).unlink()
    assert run(["expand", "3", "--json", "--store", str(store)]) == 0
    out = capsys.readouterr()
    (row,) = json.loads(out.out)
    assert row["payload_missing"] is True
    assert row["content"].startswith("Z" * 100)  # the stored preview, not ""
    assert out.err.startswith("[note] ") and "seq 3" in out.err and "missing" in out.err
    assert run(["expand", "3", "--store", str(store)]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[0].endswith("PAYLOAD MISSING (preview only)")
    assert "missing" in out.err and "Traceback" not in out.err


HOSTILE_QUERIES = [
    '"unbalanced quote',
    'say "hi',
    "(route",
    "route)",
    "((",
    "NEAR(route tolls)",
    "NEAR",
    "OR",
    "AND NOT",
    "route OR",
    "- * ^ :",
    "tolls: {col} *x",
    "🚗 route 🎉",
    "route " * 1700,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_search_queries_exit_0_with_a_result(
    store: Path, capsys: Capture, query: str
) -> None:
    # A leading "-" reads as an option to click, so the query follows "--" like any argument.
    assert run(["search", "--json", "--store", str(store), "--", query]) == 0
    out = capsys.readouterr()
    hits = json.loads(out.out)
    assert isinstance(hits, list) and "Traceback" not in out.err
    if "route" in query:
        assert 1 in [hit["seq"] for hit in hits]


SQL_WRITES = [
    "INSERT INTO hist.conversation_history(session_id, kind, created_at) VALUES ('x','y','z')",
    "UPDATE hist.conversation_history SET content = ''",
    "DELETE FROM hist.conversation_history",
    "ATTACH DATABASE '{store}/other.db' AS other",
    "PRAGMA hist.journal_mode = DELETE",
    "PRAGMA hist.user_version = 3",
    "SELECT 1; DELETE FROM hist.conversation_history",
    "SELECT 1; SELECT 2",
]


@pytest.mark.parametrize("query", SQL_WRITES)
def test_sql_writes_are_one_line_errors_and_change_nothing(
    store: Path, capsys: Capture, query: str
) -> None:
    db = store / "history.db"
    before = db.read_bytes()
    assert run(["sql", query.format(store=store), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert db.read_bytes() == before
    assert not (store / "other.db").exists()
    with EventLog.open(db) as log:
        assert log.count() == 3


def test_the_sql_row_cap_note_reaches_a_kernel_cell_observation(
    store_dir: Path, capsys: Capture
) -> None:
    with EventLog.open(store_dir / "history.db") as log:
        log.append_many(
            NewEvent(session_id="s", kind="conversation", content=f"row {i}") for i in range(1001)
        )
    cell = (
        'r = ms.sql_query("SELECT seq FROM hist.conversation_history"); print(len(r), r.truncated)'
    )
    assert run(["exec", cell, "--store", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert "1000 True" in out
    assert "[note] sql_query hit the 1000-row cap" in out


def test_broadened_rows_are_explained(store: Path, capsys: Capture) -> None:
    assert run(["search", "route tolls", "--store", str(store)]) == 0
    captured = capsys.readouterr()
    assert "(broadened)" in captured.out
    assert captured.err.splitlines() == [
        "[note] fewer than 10 rows contain every word of 'route tolls'; the rows marked "
        "(broadened) contain only some of them"
    ]
    assert run(["search", "tolls", "--store", str(store)]) == 0
    assert capsys.readouterr().err == ""  # every row has the word: nothing to explain


def test_search_json_carries_whole_content_not_a_kernel_hint(
    store_dir: Path, capsys: Capture
) -> None:
    long_text = "tolls " + "word " * 400
    with EventLog.open(store_dir / "history.db") as log:
        log.append(NewEvent(session_id="s", kind="conversation", role="user", content=long_text))

    assert run(["search", "tolls", "--json", "--store", str(store_dir)]) == 0
    (hit,) = _json(capsys)  # type: ignore[misc]
    assert hit["content"] == long_text and "ms.expand" not in hit["content"]


def test_sql_says_a_misspelled_statement_is_not_a_write(store: Path, capsys: Capture) -> None:
    assert run(["sql", "SELEC 1", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "did you mean SELECT?" in err and "read-only" not in err
    assert run(["sql", "SELECT * FROM events", "--store", str(store)]) == 2
    assert "the events are in hist.conversation_history" in capsys.readouterr().err
