"""Bad input to ``scroll mcp``: every tool's bad arguments, a damaged store, a read-only server,
a missing store, a missing extra. Each is a one-line error the model (or user) can act on, and
the server keeps serving."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import call, stdio_session, text

from damage import flip_byte
from scrollctx.cli import run

pytestmark = pytest.mark.anyio

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("scroll_search", {}, "query: Field required"),
    ("scroll_search", {"query": ""}, "query: String should have at least 1 character"),
    ("scroll_search", {"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("scroll_search", {"query": "x", "k": "many"}, "k: Input should be a valid integer"),
    ("scroll_search", {"query": "x", "mode": "vibes"}, "mode: Input should be 'bm25'"),
    ("scroll_search", {"query": "x", "created_from": "last week"}, "created_from takes an ISO"),
    # The SDK ignores an argument a tool does not take: the search ran unfiltered, unsaid.
    ("scroll_search", {"query": "x", "seq_range": [5, 9]}, "seq_range: not an argument of"),
    ("scroll_expand", {}, "takes seqs=[...] or both lo and hi"),
    ("scroll_expand", {"seqs": [1], "lo": 1, "hi": 2}, "not both or neither"),
    ("scroll_expand", {"lo": 5}, "takes seqs=[...] or both lo and hi"),
    ("scroll_expand", {"seqs": ["one"]}, "seqs: Input should be a valid integer"),
    ("scroll_expand", {"seqs": []}, "seqs: List should have at least 1 item"),
    ("scroll_expand", {"seqs": [1], "max_bytes": 10}, "max_bytes: Input should be greater"),
    ("scroll_expand", {"seqs": [1], "limit": 10}, "limit: not an argument of scroll_expand (it"),
    ("scroll_sql", {"sql": "DROP TABLE hist.conversation_history"}, "sql_query is read-only"),
    ("scroll_sql", {"sql": "SELECT ?, ?", "params": [1]}, "matching parameters"),
    ("scroll_sql", {"sql": "SELECT * FROM nowhere"}, "no such table: nowhere"),
    ("scroll_sql", {"sql": "SELECT 1; SELECT 2"}, "exactly one statement"),
    ("scroll_index", {}, "session_id: Field required"),
    ("scroll_python", {}, "source: Field required"),
    ("scroll_python", {"source": "1", "timeout": -1}, "timeout: Input should be greater than 0"),
    ("scroll_python", {"source": "1", "session": "forged-handle"}, "never issued by this server"),
    ("scroll_append", {"session_id": "s"}, "content: Field required"),
    ("scroll_append", {"session_id": "s", "content": "x", "kind": "eviction_index"}, "kind: Input"),
    ("scroll_append", {"session_id": "s", "content": "x", "role": "root"}, "role: Input should"),
    ("scroll_ingest", {"path": "/etc/passwd"}, "start the server with --ingest-dir DIR"),
    ("scroll_nope", {}, "Unknown tool"),
]


async def test_every_bad_argument_is_a_one_line_tool_error(
    beam_store: Path, tmp_path: Path
) -> None:
    async with stdio_session(beam_store, errlog=tmp_path / "err") as client:
        for tool, arguments, expected in BAD:
            result = await client.call_tool(tool, arguments)
            said = text(result)
            assert result.is_error, f"{tool}({arguments}) was not an error: {said}"
            assert "\n" not in said and "Traceback" not in said, said
            assert expected in said, f"{tool}({arguments}): {said}"
        ok = await call(client, "scroll_search", query="Flask")  # the connection survived
        assert not ok.is_error


async def test_a_read_only_server_reports_a_damaged_store_and_repairs_nothing(
    beam_store: Path, tmp_path: Path
) -> None:
    db = beam_store / "history.db"
    flip_byte(db, b"Transaction Management**", offset=2)
    damaged = db.read_bytes()
    async with stdio_session(beam_store, "--read-only", errlog=tmp_path / "err") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "scroll_append" not in names and "scroll_ingest" not in names
        for tool in ("scroll_append", "scroll_ingest"):
            result = await client.call_tool(tool, {"session_id": "s", "content": "x", "path": "x"})
            assert result.is_error and "refused: this server is read-only" in text(result)

        result = await call(client, "scroll_search", query="Transaction Management")
        assert result.is_error
        assert "the store is damaged" in text(result) and "scroll doctor" in text(result)
        assert "seq 3" in text(result)
        python = await call(client, "scroll_python", source="ms.expand(3)")
        assert "IntegrityError" in text(python)
        elsewhere = await call(client, "scroll_search", query="Flask logging")
        assert not elsewhere.is_error  # the rest of the store is still served

        sql = "SELECT count(*) AS n FROM hist.conversation_history WHERE kind = 'system'"
        logged = await call(client, "scroll_sql", sql=sql)
        assert logged.structured_content["rows"] == [{"n": 0}]  # not even the kernel's journal
    assert db.read_bytes() == damaged


def test_a_missing_store_and_a_missing_extra_are_clear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["mcp", "--store", str(tmp_path / "none"), "--read-only"]) == 1
    assert "a --read-only server serves an existing store" in capsys.readouterr().err
    without_sdk = (
        "import sys; sys.modules['mcp'] = None; from scrollctx.cli import run; "
        f"sys.exit(run(['mcp', '--store', {str(tmp_path / 's')!r}]))"
    )
    result = subprocess.run([sys.executable, "-c", without_sdk], capture_output=True, text=True)
    assert result.returncode == 2
    assert "pip install 'scrollctx[mcp]'" in result.stderr
