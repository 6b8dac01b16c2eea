"""Gemini CLI, ChatGPT export and Aider end to end, with counts derived from the raw files."""

from __future__ import annotations

import copy
import json
import re
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from ingest_helpers import write_json
from transcript_helpers import kind_role_counts, rows

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog

GEMINI = "gemini-cli/session-2025-12-01T21-45-5b959dae.json"
CHATGPT = "chatgpt-export/conversations.json"
AIDER = "aider/.aider.chat.history.md"


def test_gemini_session(event_log: EventLog, transcripts: Path) -> None:
    session = json.loads((transcripts / GEMINI).read_text(encoding="utf-8"))
    report = ingest_path(event_log, transcripts / GEMINI)
    assert report.format == "gemini-cli" and report.problems == []
    messages = session["messages"]
    gemini = [m for m in messages if m["type"] == "gemini"]
    calls = [c for m in gemini for c in m.get("toolCalls", [])]
    assert kind_role_counts(event_log) == Counter(
        {
            ("user_message", "user"): sum(m["type"] == "user" for m in messages),
            ("model_turn", "assistant"): sum(bool(m["content"]) for m in gemini),
            ("reasoning", "assistant"): sum(len(m.get("thoughts", [])) for m in gemini),
            ("tool_call", "assistant"): len(calls),
            ("tool_result", "tool"): len(calls),
        }
    )
    for call in calls:  # each call embeds its result; both carry the call's id
        [result] = rows(event_log, "kind = 'tool_result' AND tool_call_id = ?", (call["id"],))
        assert result["content"] == call["result"][0]["functionResponse"]["response"]["output"]
    imported = rows(event_log, "run_id = 'ingest'")
    tokens = [r["metadata"]["tokens"] for r in imported if "tokens" in r["metadata"]]
    assert tokens == [m["tokens"] for m in gemini]  # once per message
    assert {r["session_id"] for r in imported} == {f"gemini-cli:{session['sessionId']}"}
    assert ingest_path(event_log, transcripts / GEMINI).events_added == 0


def _expected_chatgpt(mapping: dict[str, Any]) -> Counter:
    counts: Counter = Counter()
    for node in mapping.values():
        message = node["message"]
        if message is None:
            continue
        role = message["author"]["role"]
        if role == "tool":
            counts["tool_result", "tool"] += 1
        elif role == "assistant" and message["recipient"] != "all":
            counts["tool_call", "assistant"] += 1
        else:
            kind = {"user": "user_message", "assistant": "model_turn", "system": "system"}[role]
            counts[kind, role] += 1
    return counts


def test_chatgpt_export(event_log: EventLog, transcripts: Path) -> None:
    [conversation] = json.loads((transcripts / CHATGPT).read_text(encoding="utf-8"))
    report = ingest_path(event_log, transcripts / CHATGPT)
    assert report.format == "chatgpt" and report.problems == [] and report.sessions == 1
    assert kind_role_counts(event_log) == _expected_chatgpt(conversation["mapping"])
    for result in rows(event_log, "kind = 'tool_result'"):  # paired by tree adjacency
        parent = conversation["mapping"][result["metadata"]["node_id"]]["parent"]
        assert result["tool_call_id"] == parent
        [call] = rows(event_log, "kind = 'tool_call' AND tool_call_id = ?", (parent,))
        assert (
            call["tool_input"]["code"]
            == conversation["mapping"][parent]["message"]["content"]["text"]
        )
    path = [r["metadata"]["node_id"] for r in rows(event_log, "run_id = 'ingest'")]
    node, walked = conversation["current_node"], []
    while node is not None:
        if conversation["mapping"][node]["message"] is not None:
            walked.append(node)
        node = conversation["mapping"][node]["parent"]
    assert path == walked[::-1]  # root to current_node, in order


def test_chatgpt_branches_are_sessions_with_lineage(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    [conversation] = json.loads((transcripts / CHATGPT).read_text(encoding="utf-8"))
    mapping = conversation["mapping"]
    # Regenerate the first assistant answer: a sibling node, a branch the user left.
    first_answer = next(
        nid for nid, n in mapping.items()
        if n["message"] and n["message"]["author"]["role"] == "assistant"
    )  # fmt: skip
    fork = mapping[first_answer]["parent"]
    retry = copy.deepcopy(mapping[first_answer])
    retry.update(id="retry-1", children=[])
    retry["message"]["id"] = "retry-1"
    retry["message"]["content"]["parts"] = ["A different first answer."]
    mapping["retry-1"] = retry
    mapping[fork]["children"].append("retry-1")
    branched = tmp_path / "conversations.json"
    branched.write_text(json.dumps([conversation]), encoding="utf-8")
    report = ingest_path(event_log, branched)
    assert report.sessions == 2
    main = f"chatgpt:{conversation['conversation_id']}"
    [branch] = rows(event_log, "session_id != ? AND run_id = 'ingest'", (main,))
    assert branch["content"] == "A different first answer."
    assert branch["metadata"]["branch_of"] == main and branch["metadata"]["branch_point"] == fork
    assert kind_role_counts(event_log) == _expected_chatgpt(mapping)  # every node once


def test_a_chatgpt_tree_with_cycles_imports_every_node_once(
    event_log: EventLog, transcripts: Path, tmp_path: Path
) -> None:
    [conversation] = json.loads((transcripts / CHATGPT).read_text(encoding="utf-8"))
    mapping = conversation["mapping"]
    root = next(nid for nid, node in mapping.items() if node["parent"] is None)
    mapping[root]["parent"] = conversation["current_node"]  # the main path loops on itself
    island = copy.deepcopy(mapping[conversation["current_node"]])  # two nodes no leaf reaches
    for nid, other in (("island-x", "island-y"), ("island-y", "island-x")):
        mapping[nid] = {**copy.deepcopy(island), "id": nid, "parent": other, "children": [other]}
        mapping[nid]["message"]["content"]["parts"] = [f"the node {nid}"]
    damaged = write_json(tmp_path / "conversations.json", [conversation])

    def hung(*_: object) -> None:
        raise TimeoutError("the import walked a cycle of parent links for good")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 20)
    try:
        report = ingest_path(event_log, damaged)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert report.problems == [] and report.sessions == 2
    assert kind_role_counts(event_log) == _expected_chatgpt(mapping)  # every node, once
    found = rows(event_log, "content LIKE 'the node island-%'")
    assert {r["session_id"] for r in found} == {
        f"chatgpt:{conversation['conversation_id']}:island-x"
    }


def _aider_expected(text: str) -> Counter:
    """Blocks by kind: runs of ``#### `` lines, of ``>`` lines, and of other text (replies)."""
    counts: Counter = Counter()
    previous: str | None = None
    fenced = False
    for line in text.splitlines():
        if line.startswith("# aider chat started at") and not fenced:
            previous = None
            continue
        if fenced or not line.startswith(("#### ", ">")):
            kind = "reply" if fenced or line.strip() else None
        else:
            kind = "user" if line.startswith("#### ") else "console"
        if kind == "reply" and line.strip().startswith("```"):
            fenced = not fenced
        if kind is None:  # a blank line ends a prompt or console block, not a reply
            previous = previous if previous == "reply" else None
            continue
        counts[kind] += kind != previous
        previous = kind
    return counts


def test_aider_history(event_log: EventLog, transcripts: Path) -> None:
    text = (transcripts / AIDER).read_text(encoding="utf-8")
    report = ingest_path(event_log, transcripts / AIDER)
    assert report.format == "aider" and report.problems == []
    assert report.sessions == len(re.findall(r"^# aider chat started at ", text, re.MULTILINE))
    blocks = _aider_expected(text)
    edits = len(re.findall(r"^[^\n`]+\n```[^\n]*\n<<<<<<< SEARCH$", text, re.MULTILINE))
    applied = len(re.findall(r"^> Applied edit to ", text, re.MULTILINE))
    commits = len(re.findall(r"^> Commit [0-9a-f]{7,40} ", text, re.MULTILINE))
    counts = kind_role_counts(event_log)
    assert counts[("user_message", "user")] == blocks["user"]
    assert counts[("model_turn", "assistant")] == blocks["reply"]
    assert counts[("tool_call", "assistant")] == edits
    assert counts[("tool_result", "tool")] == applied
    assert counts[("system", "tool")] == blocks["console"] + commits
    paired = rows(event_log, "kind = 'tool_result' AND tool_call_id IS NOT NULL")
    for result in paired:
        [call] = rows(
            event_log, "kind = 'tool_call' AND tool_call_id = ?", (result["tool_call_id"],)
        )
        assert call["tool_input"]["path"] == result["metadata"]["path"]
    assert ingest_path(event_log, transcripts / AIDER).events_added == 0
