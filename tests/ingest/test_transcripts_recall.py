"""Imported transcripts are recalled: ``scroll search`` finds a tool result, a cell computes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from transcript_helpers import raw_records

from scrollctx.cli import run
from scrollctx.kernel import Kernel
from scrollctx.log import EventLog

CLAUDE = "claude-code/fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
CODEX = "codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"


def test_scroll_search_finds_a_claude_tool_result_by_a_phrase_in_it(
    store_dir: Path, transcripts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["ingest", "--store", str(store_dir), str(transcripts / CLAUDE)]) == 0
    capsys.readouterr()
    results = [
        (block["tool_use_id"], block["content"])
        for r in raw_records(transcripts / CLAUDE)
        if r["type"] == "user" and isinstance(r["message"]["content"], list)
        for block in r["message"]["content"]
        if block["type"] == "tool_result" and isinstance(block["content"], str)
    ]
    words = re.compile(r"(?:[A-Za-z]{4,} ){4}[A-Za-z]{4,}")  # five words in a row
    tool_use_id, text = next((i, t) for i, t in results if len(words.findall(t)) > 3)
    query = f'"{words.findall(text)[3]}"'
    assert run(["search", query, "--kind", "tool_result", "--json", "--store", str(store_dir)]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits, f"no hit for {query}"
    found = {hit["seq"] for hit in hits}
    with EventLog.open(store_dir / "history.db") as log:
        [row] = log.execute(
            "SELECT seq FROM conversation_history WHERE tool_call_id = ? AND kind = 'tool_result'",
            (tool_use_id,),
        )
    assert row["seq"] in found


FAILED_COMMANDS = """
rows = ms.sql_query(
    "SELECT c.content AS command, json_extract(r.metadata, '$.exit_code') AS code "
    "FROM hist.conversation_history c JOIN hist.conversation_history r "
    "ON r.tool_call_id = c.tool_call_id AND r.kind = 'tool_result' "
    "WHERE c.kind = 'tool_call' AND c.name = 'exec_command' "
    "AND json_extract(r.metadata, '$.exit_code') IS NOT NULL")
failed = sorted({(row['command'], row['code']) for row in rows if row['code'] != 0})
print(json.dumps({"commands": len(rows), "failed": failed}))
"""


def test_a_recall_cell_lists_the_codex_commands_that_failed(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    run(["ingest", "--store", str(event_log.path.parent), str(transcripts / CODEX)])
    records = raw_records(transcripts / CODEX)
    commands = {
        r["payload"]["call_id"]: json.loads(r["payload"]["arguments"])["cmd"]
        for r in records
        if r["payload"].get("name") == "exec_command"
    }
    ends = [r["payload"] for r in records if r["payload"].get("type") == "exec_command_end"]
    expected = sorted(
        {(commands[e["call_id"]], e["exit_code"]) for e in ends if e["exit_code"] != 0}
    )
    assert expected  # the fixture has failing commands (exit codes 1 and 2)
    with Kernel(event_log=event_log, session_id="recall", scratch=tmp_path / "scratch") as kernel:
        result = kernel.run_cell("import json\n" + FAILED_COMMANDS)
    assert result.error is None, result.error
    answer = json.loads(result.stdout)
    assert answer["commands"] == len(ends)
    assert [tuple(pair) for pair in answer["failed"]] == expected
