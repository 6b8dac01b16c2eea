"""``scroll ingest``: human and JSON reports, exit codes, and earlier paths kept on error."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.cli import run
from scrollctx.cli._ingest import _merge_if_grown
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import open_surface


def _imported(log: EventLog) -> int:
    """Imported rows (the store also holds the carried index ingestion writes beside them)."""
    rows = log.execute("SELECT count(*) AS n FROM conversation_history WHERE run_id = 'ingest'")
    return int(rows[0]["n"])


FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"
LME = FIXTURES / "longmemeval_mini.json"


def _chat(path: Path, n: int) -> Path:
    rows = [{"role": ("user", "assistant")[i % 2], "content": f"line {i}"} for i in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_human_report_then_reimport(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = _chat(tmp_path / "talk.jsonl", 4)
    assert run(["ingest", "--store", str(store_dir), str(LME), str(chat)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 2 and out.err == ""
    assert (
        "longmemeval, 3 conversations, 7 sessions, 17 events added, 0 already present" in lines[0]
    )
    assert "openai, 1 conversations, 1 sessions, 4 events added" in lines[1]
    assert run(["ingest", "--store", str(store_dir), str(chat)]) == 0
    assert "0 events added, 4 already present" in capsys.readouterr().out


def test_json_report(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(["ingest", "--store", str(store_dir), "--json", "--format", "longmemeval", str(LME)])
        == 0
    )
    reports = json.loads(capsys.readouterr().out)
    assert [(r["format"], r["events_added"], r["events_skipped"]) for r in reports] == [
        ("longmemeval", 17, 0)
    ]
    assert set(reports[0]) == {
        "path",
        "format",
        "conversations",
        "sessions",
        "events_added",
        "events_skipped",
        "seconds",
        "files",
        "files_unrecognised",
        "records_skipped",
        "problems",
        "formats",
    }
    assert reports[0]["formats"]["longmemeval"]["events_added"] == 17


def test_error_after_a_good_path_keeps_the_good_one(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    code = run(["ingest", "--store", str(store_dir), "--json", str(LME), str(bad), str(LME)])
    assert code == 2
    out = capsys.readouterr()
    assert [r["events_added"] for r in json.loads(out.out)] == [17]
    error = json.loads(out.err)["error"]
    assert error["type"] == "FormatError" and str(bad) in error["message"]
    with EventLog.open(store_dir / "history.db") as log:
        assert _imported(log) == 17


def test_missing_path_is_one_line(store_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["ingest", "--store", str(store_dir), "/no/such/file.json"]) == 2
    err = capsys.readouterr().err
    assert err == "Error: /no/such/file.json does not exist; check the path\n"


def test_installed_console_script(store_dir: Path) -> None:
    script = Path(sys.executable).parent / "scroll"
    done = subprocess.run(
        [str(script), "ingest", "--json", str(LME)],
        capture_output=True,
        text=True,
        env={"SCROLL_STORE": str(store_dir), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["events_added"] == 17
    assert done.stderr == ""  # no progress bar when stderr is not a terminal


# (content, words in the error, events kept: the valid turns read before the problem)
BAD_FILES = {
    "truncated": (b'[{"role": "user", "content": "hi"}, {"role": "assi', "truncated", 1),
    "malformed": (b'[{"role": "user", "content": "hi"}, {"role": }]', "not valid JSON", 1),
    "unknown schema": (b'{"foo": [1, 2, 3]}', "matches no known format", 0),
    "not UTF-8": (b'[{"role": "user", "content": "caf\xe9"}]', "is not UTF-8", 0),
    "empty": (b"", "is empty", 0),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_is_one_line_exit_2_and_the_store_keeps_its_rows(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    assert run(["ingest", "--store", str(store_dir), str(LME)]) == 0
    capsys.readouterr()
    content, words, kept = BAD_FILES[case]
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert run(["ingest", "--store", str(store_dir), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"Error: {bad}") and err.count("\n") == 1, err
    assert words in err and "Traceback" not in err
    assert run(["ingest", "--store", str(store_dir), "--json", str(bad)]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["type"] == "FormatError"
    with EventLog.open(store_dir / "history.db", verify=True) as log:
        assert _imported(log) == 17 + kept  # nothing lost; valid turns before the fault kept


def test_bad_record_deep_in_a_file_keeps_the_turns_before_it(
    store_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = _chat(tmp_path / "talk.jsonl", 5)
    with chat.open("a", encoding="utf-8") as handle:
        handle.write('{"role": "user", "content": \n')
    assert run(["ingest", "--store", str(store_dir), str(chat)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 6" in err and "5 new events" in err, err
    chat.write_text(chat.read_text(encoding="utf-8").rsplit("\n", 2)[0] + "\n", encoding="utf-8")
    assert run(["ingest", "--store", str(store_dir), str(chat)]) == 0
    assert "0 events added, 5 already present" in capsys.readouterr().out


def _read_until_closed(fd: int, seconds: float) -> bytes:
    chunks: list[bytes] = []
    while select.select([fd], [], [], seconds)[0]:
        try:
            data = os.read(fd, 65536)
        except OSError:  # Linux reports EIO once the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def test_progress_bar_is_drawn_on_a_terminal(store_dir: Path, shared_data: Path) -> None:
    locomo = shared_data / "locomo" / "locomo10.json"
    script = Path(sys.executable).parent / "scroll"
    env = {"SCROLL_STORE": str(store_dir), "PATH": "/usr/bin:/bin", "TERM": "xterm"}
    main, child = pty.openpty()
    with subprocess.Popen(
        [str(script), "ingest", str(locomo)], stdout=subprocess.PIPE, stderr=child, env=env
    ) as proc:
        os.close(child)
        drawn = _read_until_closed(main, 60).decode("utf-8", "replace")
        out = proc.communicate(timeout=60)[0].decode("utf-8")
    os.close(main)
    assert proc.returncode == 0, drawn
    assert "locomo10.json: 0 events" in drawn  # drawn when the import starts
    assert "locomo10.json: 5,882 events" in drawn  # and after the last committed batch
    [line] = out.splitlines()  # stdout carries the report only
    assert line.startswith(f"{locomo}: locomo, 10 conversations, 272 sessions, 5882 events added")


def test_store_defaults_to_dot_scroll_then_scroll_store_then_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["ingest", str(LME)]) == 0
    capsys.readouterr()
    assert run(["search", "pottery", "--json"]) == 0  # the same default store, read back
    assert json.loads(capsys.readouterr().out)[0]["task_id"] == "longmemeval/7a1c2e90"
    assert (tmp_path / ".scroll" / "history.db").is_file()
    monkeypatch.setenv("SCROLL_STORE", str(tmp_path / "from-env"))
    chat = _chat(tmp_path / "talk.jsonl", 2)
    assert run(["ingest", str(chat)]) == 0
    assert run(["ingest", "--store", str(tmp_path / "from-option"), str(chat)]) == 0
    counts = {}
    for name in (".scroll", "from-env", "from-option"):
        with EventLog.open(tmp_path / name / "history.db") as log:
            counts[name] = _imported(log)
    assert counts == {".scroll": 17, "from-env": 2, "from-option": 2}


def test_a_store_path_that_is_a_file_is_one_line_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "afile"
    blocker.touch()
    assert run(["ingest", "--store", str(blocker), str(LME)]) == 1
    err = capsys.readouterr().err
    assert (
        err == f"Error: cannot create the store folder {blocker}: File exists; "
        "point --store at a folder you can write\n"
    )


def _segments(store: Path) -> int:
    with EventLog.open(store / "history.db") as log:
        rows = log.execute("SELECT count(DISTINCT segid) FROM conversation_history_fts_idx")
    return int(rows[0][0])


def test_an_import_leaves_one_merged_search_index_with_the_same_results(
    store_dir: Path, tmp_path: Path
) -> None:
    chats = [_chat(tmp_path / f"talk{i}.jsonl", 30 + i) for i in range(5)]
    unmerged = tmp_path / "unmerged"
    with EventLog.open(unmerged / "history.db") as log:
        for chat in chats:  # the same import without the CLI's last step
            ingest_path(log, chat)
    assert _segments(unmerged) > 1  # a segment per committed batch, until FTS5 merges some
    assert run(["ingest", "--store", str(store_dir), *map(str, chats)]) == 0
    assert _segments(store_dir) == 1
    for query in ("line 3", "line 17 OR line 31", "line"):
        with (
            open_surface(store_dir / "history.db") as merged,
            open_surface(unmerged / "history.db") as before,
        ):
            assert merged.search(query, k=20) == before.search(query, k=20)
    assert run(["ingest", "--store", str(store_dir), str(chats[0])]) == 0  # nothing new
    assert _segments(store_dir) == 1
    small = _chat(tmp_path / "small.jsonl", 3)  # under a tenth of the store: not worth a merge
    assert run(["ingest", "--store", str(store_dir), str(small)]) == 0
    assert _segments(store_dir) == 2


def test_the_merge_threshold_is_a_tenth_of_the_store_counted_after_the_import(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    with EventLog.open(store / "history.db") as log:
        for i in range(20):  # a commit each: a segment each, until FTS5 merges some
            log.append(NewEvent(session_id="s", kind="message", content=f"line {i}"))
        before = _segments(store)
        assert before > 1
        _merge_if_grown(log, 1)  # 1 of 20: under a tenth
        assert _segments(store) == before
        _merge_if_grown(log, 2)  # 2 of 20: exactly a tenth
        assert _segments(store) == 1
