"""``scroll embed`` and ``scroll search --mode``: real stores, the real model, a real kill."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import missing
from scrollctx.cli import run
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Encoder

BIN = Path(sys.executable).parent
Capture = pytest.CaptureFixture[str]
TOPICS = ["cilantro tastes like soap", "the TLS certificate expired", "a greyhound named Pixel",
          "sprint planning on Thursday", "my sister moved to Lisbon"]  # fmt: skip


def _write(db: Path, rows: int) -> None:
    with EventLog.open(db) as log:
        log.append_many(
            NewEvent(
                session_id=f"s{i % 3}",
                kind="conversation",
                role="user",
                content=f"Note {i}: {TOPICS[i % len(TOPICS)]}, item {i}.",
            )
            for i in range(rows)
        )


def _vectors(db: Path) -> list[tuple[int, int, bytes]]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute("SELECT seq, window, vector FROM conversation_embeddings"))
    finally:
        conn.close()


def _through(db: Path) -> int:
    conn = sqlite3.connect(db, timeout=5)
    try:
        row = conn.execute("SELECT max(through_seq) FROM embedding_models").fetchone()
        return int(row[0] or 0)
    except sqlite3.OperationalError:
        return 0  # the table is not there yet (the store is being migrated)
    finally:
        conn.close()


def test_embed_resumes_after_a_kill_without_repeating_a_vector(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    for folder in (killed, whole):
        _write(folder / "history.db", 300)
    command = [str(BIN / "scroll"), "embed", "--batch", "2", "--store", str(killed)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _through(killed / "history.db") == 0 and process.poll() is None:
        assert time.monotonic() < deadline, "scroll embed committed no batch in 120 s"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    mark = _through(killed / "history.db")
    assert 0 < mark < 300, "the kill should land mid-run; raise the row count if it does not"
    partial = _vectors(killed / "history.db")
    assert {seq for seq, _, _ in partial} == set(range(1, mark + 1))
    out = subprocess.run([*command, "--json"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["rows"] == 300 - mark and report["through_seq"] == 300
    resumed = _vectors(killed / "history.db")
    assert len(resumed) == len({(seq, w) for seq, w, _ in resumed}) == 300
    assert run(["embed", "--store", str(whole)]) == 0
    assert sorted(resumed) == sorted(_vectors(whole / "history.db"))  # same bytes as one run


def test_embed_then_search_by_meaning(
    store_dir: Path, capsys: Capture, semantic_encoder: Encoder
) -> None:
    _write(store_dir / "history.db", 10)
    assert run(["embed", "--store", str(store_dir)]) == 0
    assert "embedded 10 rows (10 vectors" in capsys.readouterr().out
    assert run(["embed", "--store", str(store_dir)]) == 0
    assert "nothing to embed" in capsys.readouterr().out
    args = ["search", "which herb do I hate", "--k", "2", "--mode", "semantic", "--json"]
    assert run([*args, "--store", str(store_dir)]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["seq"] for h in hits] == [1, 6] and {h["channel"] for h in hits} == {"semantic"}
    assert run(["search", "herb", "--mode", "bm25", "--store", str(store_dir)]) == 0
    assert capsys.readouterr().out.strip() == "(no hits)"


def test_embed_needs_a_store(tmp_path: Path, capsys: Capture) -> None:
    assert run(["embed", "--store", str(tmp_path / "none")]) == 1
    assert "run `scroll ingest FILE` first" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


_LOAD_OFFLINE = """
import socket
from scrollctx.surface import load_encoder
print([name for _, name in socket.if_nameindex()], load_encoder().encode_query("hello").shape)
"""


def test_the_model_loads_with_the_network_unavailable(semantic_encoder: Encoder) -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        missing("unshare (util-linux) is needed to run without a network")
    command = [unshare, "--net", sys.executable, "-c", _LOAD_OFFLINE]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 and "Operation not permitted" in done.stderr:
        missing(f"cannot create a network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['lo'] (384,)"


def test_ingest_embed_leaves_no_row_without_its_vectors(
    store_dir: Path, capsys: Capture, semantic_encoder: Encoder
) -> None:
    source = Path(__file__).parents[1] / "ingest" / "fixtures" / "longmemeval_mini.json"
    assert run(["ingest", str(source), "--embed", "--store", str(store_dir)]) == 0
    out = capsys.readouterr().out
    with EventLog.open(store_dir / "history.db") as log:
        assert f"embedded {log.count()} rows" in out
        assert log.embedded_through(semantic_encoder.name) == log.last_seq() > 0
