"""Codex CLI rollouts (0.58 and 0.125) end to end, with counts derived from the raw lines."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from transcript_helpers import kind_role_counts, raw_records, rows

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

FILES = [
    "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
]
MIRRORS = {"user_message", "agent_message", "agent_reasoning", "web_search_end"}


def _text(payload: dict[str, Any]) -> str:
    return "\n".join(part.get("text", "") for part in payload["content"])


def _states_exit(output: str) -> bool:
    try:
        return "exit_code" in json.loads(output).get("metadata", {})
    except (ValueError, AttributeError):
        return re.search(r"^Process exited with code", output, re.MULTILINE) is not None


def expected(records: list[dict[str, Any]]) -> tuple[Counter, Counter]:
    """The documented mapping, applied to raw records: (kind, role) counts and skips by type."""
    counts: Counter = Counter()
    skipped: Counter = Counter()
    typed = {
        r["payload"]["message"].strip()
        for r in records
        if r["payload"].get("type") == "user_message"
    }
    exit_stated = {
        r["payload"]["call_id"]
        for r in records
        if r["payload"].get("type", "").endswith("_output") and _states_exit(r["payload"]["output"])
    }
    for record in records:
        rtype, payload = record["type"], record["payload"]
        ptype = payload.get("type")
        if rtype in ("session_meta", "turn_context"):
            counts["system", "system"] += 1
        elif rtype == "response_item" and ptype == "message":
            role = payload["role"]
            if role == "assistant":
                counts["model_turn", "assistant"] += 1
            elif role == "user" and _text(payload).strip() in typed:
                counts["user_message", "user"] += 1
            else:
                counts["system", role] += 1
        elif rtype == "response_item":
            kind = {"reasoning": "reasoning", "ghost_snapshot": "system"}.get(ptype)
            if ptype.endswith("_output"):
                counts["tool_result", "tool"] += 1
            elif ptype.endswith("_call"):
                counts["tool_call", "assistant"] += 1
            else:
                counts[kind, "system" if kind == "system" else "assistant"] += 1
        elif ptype in MIRRORS:
            skipped[f"event_msg/{ptype}"] += 1
        elif ptype in ("exec_command_end", "patch_apply_end"):
            if payload["call_id"] in exit_stated:
                skipped[f"event_msg/{ptype}"] += 1
            else:
                counts["tool_result", "tool"] += 1
        else:
            assert ptype in ("token_count", "task_started", "task_complete"), ptype
            counts["system", "system"] += 1
    return counts, skipped


@pytest.mark.parametrize("name", FILES)
def test_every_record_becomes_the_documented_events(
    event_log: EventLog, transcripts: Path, name: str
) -> None:
    path = transcripts / "codex" / name
    report = ingest_path(event_log, path)
    counts, skipped = expected(raw_records(path))
    assert report.format == "codex" and report.problems == []
    assert report.records_skipped == dict(skipped)
    assert kind_role_counts(event_log) == counts
    again = ingest_path(event_log, path)
    assert (again.events_added, again.events_skipped) == (0, report.events_added)


@pytest.mark.parametrize("name", FILES)
def test_calls_pair_with_outputs_and_commands_get_exit_codes(
    event_log: EventLog, transcripts: Path, name: str
) -> None:
    path = transcripts / "codex" / name
    ingest_path(event_log, path)
    records = raw_records(path)
    calls = {r["tool_call_id"]: r for r in rows(event_log, "kind = 'tool_call'")}
    results = rows(event_log, "kind = 'tool_result'")
    assert {r["tool_call_id"] for r in results} == {c for c in calls if not c.startswith("ws_")}
    assert all(r["name"] == calls[r["tool_call_id"]]["name"] for r in results)
    ends = {
        r["payload"]["call_id"]: r["payload"]
        for r in records
        if r["payload"].get("type") == "exec_command_end"
    }
    for call_id, end in ends.items():
        final = [
            r for r in results if r["tool_call_id"] == call_id and "exit_code" in r["metadata"]
        ]
        assert [r["metadata"]["exit_code"] for r in final] == [end["exit_code"]]
    searches = [r for r in records if r["payload"].get("type") == "web_search_end"]
    for search in searches:  # web search calls carry no id; the end event lends its own
        [call] = [c for c in calls.values() if c["tool_call_id"] == search["payload"]["call_id"]]
        assert call["content"] == search["payload"]["query"]


def test_session_metadata_and_token_counts(event_log: EventLog, transcripts: Path) -> None:
    path = transcripts / "codex" / FILES[1]
    ingest_path(event_log, path)
    meta = raw_records(path)[0]["payload"]
    first = rows(event_log, "kind = 'user_message'")[0]
    assert first["session_id"] == f"codex:{meta['id']}" and first["content"] == "show tools"
    assert (
        first["metadata"]["cwd"] == meta["cwd"]
        and first["metadata"]["git_branch"] == meta["git"]["branch"]
    )
    assert first["metadata"]["model"] == "gpt-5.5"
    tokens = rows(event_log, "json_extract(metadata, '$.record_type') = 'event_msg/token_count'")
    raw_tokens = [r for r in raw_records(path) if r["payload"].get("type") == "token_count"]
    assert [t["metadata"].get("info") for t in tokens] == [r["payload"]["info"] for r in raw_tokens]
    assert not any(t["searchable"] for t in tokens)
