"""Claude Code transcripts: every fixture file end to end, counts derived from the raw lines."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from transcript_helpers import kind_role_counts, raw_records, rows

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

HARNESS = {
    "system",
    "attachment",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "last-prompt",
}
FILES = [
    "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl",
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
    "ef958aa1-0e93-49f0-bb71-150f63befcd1/subagents/agent-a4ca7529859c158c2.jsonl",
    "session-624a4a58.jsonl",
]


def expected_counts(records: list[dict[str, Any]]) -> Counter:
    """The documented mapping, applied to raw records: (kind, role) -> events."""
    counts: Counter = Counter()
    blocks_seen: set[tuple[str, str]] = set()
    for record in records:
        rtype, message = record["type"], record.get("message") or {}
        content = message.get("content")
        if rtype == "user" and record.get("isCompactSummary"):
            counts["summary", "user"] += 1
        elif rtype == "user":
            blocks = [{"type": "text"}] if isinstance(content, str) else content
            for block in blocks:
                if block["type"] == "tool_result":
                    counts["tool_result", "tool"] += 1
                    counts["system", "tool"] += "toolUseResult" in record
                else:
                    counts["system" if record.get("isMeta") else "user_message", "user"] += 1
        elif rtype == "assistant":
            kinds = {"text": "model_turn", "thinking": "reasoning", "tool_use": "tool_call"}
            for block in content:
                key = (message["id"], json.dumps(block, sort_keys=True))
                if key not in blocks_seen:
                    blocks_seen.add(key)
                    counts[kinds[block["type"]], "assistant"] += 1
        elif rtype == "summary" or record.get("subtype") == "away_summary":
            counts["summary", "system"] += 1
        else:
            assert rtype in HARNESS, rtype
            counts["system", "system"] += 1
    return counts


@pytest.mark.parametrize("name", FILES)
def test_every_record_becomes_the_documented_events(
    event_log: EventLog, transcripts: Path, name: str
) -> None:
    path = transcripts / "claude-code" / name
    report = ingest_path(event_log, path)
    assert report.format == "claude-code" and report.problems == []
    assert report.records_skipped == {}
    assert kind_role_counts(event_log) == expected_counts(raw_records(path))
    again = ingest_path(event_log, path)
    assert (again.events_added, again.events_skipped) == (0, report.events_added)


def test_session_metadata_and_timestamps(event_log: EventLog, transcripts: Path) -> None:
    path = transcripts / "claude-code" / "session-624a4a58.jsonl"
    ingest_path(event_log, path)
    records = [r for r in raw_records(path) if r.get("sessionId")]
    session = f"claude-code:{records[0]['sessionId']}"
    found = rows(event_log, "session_id = ? AND kind = 'user_message'", (session,))
    first_prompt = next(r for r in records if r["type"] == "user" and not r.get("isMeta"))
    assert found[0]["created_at"][:23] == first_prompt["timestamp"][:23]
    meta = found[0]["metadata"]
    assert meta["cwd"] == first_prompt["cwd"] and meta["git_branch"] == first_prompt["gitBranch"]
    assert meta["project"] == "claude-code" and meta["agent_kind"] == "main"
    assert meta["date"] == first_prompt["timestamp"][:10]
    models = {r["message"]["model"] for r in records if r["type"] == "assistant"}
    assert {r["metadata"]["model"] for r in rows(event_log, "kind = 'model_turn'")} <= models


def test_undated_records_take_the_time_of_the_next_dated_one(
    event_log: EventLog, transcripts: Path
) -> None:
    path = transcripts / "claude-code" / FILES[0]  # opens with 15 summary lines, undated
    ingest_path(event_log, path)
    first_dated = next(r["timestamp"] for r in raw_records(path) if "timestamp" in r)
    titles = rows(event_log, "kind = 'summary'")
    assert len(titles) == 15
    assert {t["created_at"][:23] for t in titles} == {first_dated[:23]}


def test_tool_calls_pair_with_results_by_tool_use_id(
    event_log: EventLog, transcripts: Path
) -> None:
    ingest_path(event_log, transcripts / "claude-code")
    calls = {r["tool_call_id"]: r for r in rows(event_log, "kind = 'tool_call'")}
    results = Counter(r["tool_call_id"] for r in rows(event_log, "kind = 'tool_result'"))
    assert set(results) == set(calls) and set(results.values()) == {1}
    for result in rows(event_log, "kind = 'tool_result'"):
        assert result["name"] == calls[result["tool_call_id"]]["name"]


def test_usage_is_counted_once_per_api_message(event_log: EventLog, transcripts: Path) -> None:
    path = transcripts / "claude-code" / "session-624a4a58.jsonl"
    ingest_path(event_log, path)
    last_line = {  # a message's lines repeat its usage as it grows; the last one is final
        r["message"]["id"]: r["message"]["usage"]["output_tokens"]
        for r in raw_records(path)
        if r["type"] == "assistant"
    }
    [(messages, tokens)] = event_log.execute(USAGE_SQL)
    assert (messages, tokens) == (len(last_line), sum(last_line.values()))


USAGE_SQL = """
SELECT count(*), sum(json_extract(metadata, '$.message.usage.output_tokens'))
FROM conversation_history
WHERE seq IN (SELECT max(seq) FROM conversation_history WHERE role = 'assistant'
              GROUP BY json_extract(metadata, '$.message.id'))
"""
"""The documented way to count a Claude Code message's usage once (docs/ingest.md)."""


def test_thinking_keeps_its_signature_even_when_empty(
    event_log: EventLog, transcripts: Path
) -> None:
    path = transcripts / "claude-code" / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    ingest_path(event_log, path)
    signatures = [
        block["signature"]
        for r in raw_records(path)
        if r["type"] == "assistant"
        for block in r["message"]["content"]
        if block["type"] == "thinking"
    ]
    thinking = rows(event_log, "kind = 'reasoning'")
    assert [r["metadata"]["signature"] for r in thinking] == signatures
    assert {r["content"] for r in thinking} == {""}


def test_compaction_keeps_boundary_and_marks_the_summary(
    event_log: EventLog, transcripts: Path
) -> None:
    path = transcripts / "claude-code" / "session-624a4a58.jsonl"
    ingest_path(event_log, path)
    raw = next(r for r in raw_records(path) if r.get("isCompactSummary"))
    [summary] = rows(event_log, "kind = 'summary'")
    assert summary["content"] == raw["message"]["content"]
    assert summary["metadata"]["lossy_summary"] is True
    assert summary["metadata"]["summary_of"] == "compaction"
    assert summary["metadata"]["summary_author"] == "agent"
    [boundary] = rows(event_log, "json_extract(metadata, '$.subtype') = 'compact_boundary'")
    assert summary["metadata"]["compact_boundary_uuid"] == boundary["metadata"]["uuid"]
    assert boundary["metadata"]["record"]["compactMetadata"]["preTokens"] == 155979
    assert boundary["seq"] < summary["seq"]


def test_inline_sidechains_are_their_own_agents_linked_to_task_calls(
    event_log: EventLog, transcripts: Path
) -> None:
    path = transcripts / "claude-code" / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    ingest_path(event_log, path)
    records = raw_records(path)
    roots = [r for r in records if r.get("isSidechain") and r["parentUuid"] is None]
    sidechain_uuids = {r["uuid"] for r in records if r.get("isSidechain")}
    for root in roots:
        agent = f"sidechain-{root['uuid']}"
        found = rows(event_log, "agent_id = ?", (agent,))
        assert {r["metadata"]["uuid"] for r in found} <= sidechain_uuids
        [call] = rows(
            event_log,
            "tool_call_id = ? AND kind = 'tool_call'",
            (found[0]["metadata"]["parent_tool_call_id"],),
        )
        assert (
            call["agent_id"] is None and call["tool_input"]["prompt"] == root["message"]["content"]
        )
        assert found[0]["metadata"]["agent_kind"] == "subagent"
    in_sidechains = len(rows(event_log, "agent_id LIKE 'sidechain-%'"))
    main_uuids = {
        r["metadata"]["uuid"] for r in rows(event_log, "agent_id IS NULL AND run_id = 'ingest'")
    }
    assert in_sidechains > 0 and not main_uuids & sidechain_uuids


def test_subagent_file_is_linked_to_the_agent_call(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    ingest_path(event_log, transcripts / "claude-code")
    agent_file = transcripts / "claude-code" / FILES[3]
    agent_id = raw_records(agent_file)[0]["agentId"]
    found = rows(event_log, "agent_id = ?", (agent_id,))
    assert len(found) == sum(expected_counts(raw_records(agent_file)).values())
    meta = found[0]["metadata"]
    assert meta["subagent_type"] == "general-purpose"
    assert meta["subagent_description"] == "Research Claude Code plan mode"
    [call] = rows(
        event_log, "kind = 'tool_call' AND tool_call_id = ?", (meta["parent_tool_call_id"],)
    )
    assert call["name"] == "Agent" and call["agent_id"] is None
    assert found[0]["session_id"] == call["session_id"] == meta["parent_session_id"]
    [result] = rows(event_log, "kind = 'tool_result' AND tool_call_id = ?", (call["tool_call_id"],))
    assert result["metadata"]["subagent_id"] == agent_id
    # The beside-the-session layout (2.0.x) links the same way, through the sibling file.
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(transcripts / "claude-code" / FILES[2], project / FILES[2])
    shutil.copy(agent_file, project / agent_file.name)
    with EventLog.open(tmp_path / "other" / "history.db") as other:
        ingest_path(other, project)
        [linked] = {
            r["metadata"]["parent_tool_call_id"] for r in rows(other, "agent_id = ?", (agent_id,))
        }
    assert linked == call["tool_call_id"]
