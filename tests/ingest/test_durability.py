"""The Event Log under real concurrent and killed processes, driven through ``ingest_path``.

Children are real interpreters (the venv's python). They are synchronised through pipes: a
child says ``ready`` and waits for ``go``; the killed child says ``mid`` from inside an open
write transaction and then blocks on its stdin, so the kill lands mid-batch by construction,
never by timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ingest_helpers import NOT_CARRIED, chat_messages, imported_count, write_jsonl

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, NewEvent


def _assert_search_index_matches_rows(log: EventLog, counts: dict[str, int]) -> None:
    # FTS5 compares its index with the rows it is built from; a gap raises "malformed".
    log.execute(
        "INSERT INTO conversation_history_fts(conversation_history_fts, rank) "
        "VALUES ('integrity-check', 1)"
    )
    found = {
        word: log.execute(
            "SELECT count(*) FROM conversation_history_fts WHERE conversation_history_fts MATCH ?",
            (word,),
        )[0][0]
        for word in counts
    }
    assert found == counts


_CHILD = r"""
import json, os, sys
from pathlib import Path
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog, NewEvent

store, mode, *paths = sys.argv[1:]
log = EventLog.open(store)
print("ready", flush=True)
sys.stdin.readline()
reports = []
if mode == "append":
    for i in range(300):
        log.append(NewEvent(session_id="direct", kind="system", content=f"direct append {i}"))
for path in paths:
    reports.append(ingest_path(log, Path(path), batch_size=100).events_added)
print(json.dumps(reports), flush=True)
"""

_KILLED_CHILD = r"""
import os, sys
from pathlib import Path
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

store, path, batch, stop_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
log = EventLog.open(store)
inserts = 0

def trace(sql):
    global inserts
    # The batch's full-text indexing runs once per batch, inside its open transaction,
    # after the batch's rows were inserted and before COMMIT.
    if sql.lstrip().startswith("INSERT INTO conversation_history_fts"):
        inserts += 1
        if inserts == stop_at:
            print("mid", flush=True)
            os.read(0, 1)  # block inside the open transaction until killed

log._conn.set_trace_callback(trace)
ingest_path(log, Path(path), batch_size=batch,
            progress=lambda done, total: print(f"committed {done}", flush=True))
print("finished", flush=True)
"""


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_ingest_and_append_at_once(tmp_path: Path) -> None:
    store = tmp_path / "store" / "history.db"
    own_a = write_jsonl(tmp_path / "a.jsonl", chat_messages(1500, tag="alpha"))
    own_b = write_jsonl(tmp_path / "b.jsonl", chat_messages(1500, tag="beta"))
    shared = write_jsonl(tmp_path / "shared.jsonl", chat_messages(1000, tag="shared"))
    children = [
        _spawn(_CHILD, str(store), "ingest", str(own_a), str(shared)),
        _spawn(_CHILD, str(store), "append", str(shared), str(own_b)),
    ]
    for child in children:
        assert child.stdout is not None and child.stderr is not None
        line = child.stdout.readline()
        assert line == "ready\n", f"child ended early: {child.stderr.read()[-2000:]}"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    added = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        added.append(json.loads(out))
    assert added[0][0] == 1500 and added[1][1] == 1500
    assert added[0][1] + added[1][0] == 1000  # the shared file landed once, split between them
    with EventLog.open(store, verify=True) as log:
        assert imported_count(log) == 1500 + 1500 + 1000
        (row,) = log.execute(
            "SELECT count(DISTINCT seq) AS seqs, count(DISTINCT session_id || ':' || dedup_key)"
            f" AS keys, count(dedup_key) AS keyed FROM conversation_history WHERE {NOT_CARRIED}"
        )
        assert (row["seqs"], row["keys"], row["keyed"]) == (4300, 4000, 4000)
        shared_rows = log.session_events("openai:shared")
        assert [e.msg_index for e in shared_rows] == list(range(1000))
        _assert_search_index_matches_rows(
            log, {"alpha": 1500, "beta": 1500, "shared": 1000, "direct": 300}
        )


def test_killed_mid_batch_keeps_committed_batches_and_reimport_completes(tmp_path: Path) -> None:
    store = tmp_path / "store" / "history.db"
    source = write_jsonl(tmp_path / "big.jsonl", chat_messages(2000, tag="big"))
    with EventLog.open(store) as log:
        log.append(NewEvent(session_id="earlier", kind="system", content="written before"))
    child = _spawn(_KILLED_CHILD, str(store), str(source), "500", "3")
    assert child.stdout is not None
    lines = [child.stdout.readline() for _ in range(3)]
    assert child.stderr is not None
    assert "" not in lines, f"child ended early: {child.stderr.read()[-2000:]}"
    assert lines == ["committed 500\n", "committed 1000\n", "mid\n"]
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    with EventLog.open(store, verify=True) as log:
        log.check()
        assert log.count() == 1 + 1000  # killed before the end: no carried index yet
        kept = log.session_events("openai:big")
        assert [e.msg_index for e in kept] == list(range(1000))
        _assert_search_index_matches_rows(log, {"big": 1000, "written": 1})
        report = ingest_path(log, source)
        assert (report.events_added, report.events_skipped) == (1000, 1000)
        assert [e.msg_index for e in log.session_events("openai:big")] == list(range(2000))
        assert log.get(1).content == "written before"
        _assert_search_index_matches_rows(log, {"big": 2000, "written": 1})
    assert os.path.getsize(store) > 0
