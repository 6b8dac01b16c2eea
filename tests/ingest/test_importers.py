"""Each importer on real data (LoCoMo, BEAM) or exact-schema fixtures (LongMemEval, BEAM-10M)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from ingest_helpers import chat_messages, imported_count, write_json, write_jsonl

from scrollctx.ingest import FORMATS, IngestReport, ingest_path
from scrollctx.log import Event, EventLog, Kind


def _task(log: EventLog, task_id: str) -> list[Event]:
    rows = log.execute("SELECT seq FROM conversation_history WHERE task_id = ?", (task_id,))
    return log.events([row["seq"] for row in rows])


def _assert_chat_invariants(events: list[Event]) -> None:
    assert [e.msg_index for e in events] == list(range(len(events)))
    steps = [e.step_index for e in events]
    assert steps == sorted(steps) and steps[0] == 1
    assert all(e.run_id == "ingest" and e.dedup_key for e in events)
    created = [e.created_at for e in events]
    assert created == sorted(created) and len(set(created)) == len(created)


def test_formats_are_the_documented_names() -> None:
    assert FORMATS == (
        "auto", "aider", "beam", "chatgpt", "claude-code", "codex", "gemini-cli", "locomo",
        "longmemeval", "openai",
    )  # fmt: skip


# -- LoCoMo ------------------------------------------------------------------------------------


def test_locomo_imports_every_turn_with_its_ids(event_log: EventLog, shared_data: Path) -> None:
    source = json.loads((shared_data / "locomo/locomo10.json").read_text("utf-8"))
    report = ingest_path(event_log, shared_data / "locomo/locomo10.json")
    assert report.format == "locomo"
    assert report.conversations == len(source)
    turns = {
        (s["sample_id"], t["dia_id"]): t
        for s in source
        for k, v in s["conversation"].items()
        if re.fullmatch(r"session_\d+", k)
        for t in v
    }
    assert report.events_added == len(turns) == imported_count(event_log)
    events = _task(event_log, "locomo/conv-26")
    _assert_chat_invariants(events)
    first = events[0]
    assert first.kind == Kind.CONVERSATION
    assert first.session_id == "locomo:conv-26:s1"
    assert first.role == "user" and first.name == "Caroline"
    assert (
        first.content
        == "[Session 1 | 2023-05-08] Caroline: Hey Mel! Good to see you! How have you been?"
    )
    assert first.created_at.startswith("2023-05-08T13:56:00")
    assert first.metadata["dia_id"] == "D1:1" and first.metadata["date"] == "2023-05-08"
    assert events[1].role == "assistant" and events[1].name == "Melanie"
    for event in events:
        turn = turns[("conv-26", event.metadata["dia_id"])]
        assert (
            event.step_index == event.metadata["session"] == int(turn["dia_id"][1:].split(":")[0])
        )
        if turn.get("blip_caption"):
            assert event.content.endswith(f"[image: {turn['blip_caption']}]")


def test_reimport_adds_nothing(event_log: EventLog, shared_data: Path) -> None:
    ingest_path(event_log, shared_data / "locomo/locomo10.json")
    last = event_log.last_seq()
    again = ingest_path(event_log, shared_data / "locomo/locomo10.json", batch_size=500)
    assert again.events_added == 0 and again.events_skipped == imported_count(event_log)
    assert event_log.last_seq() == last


# -- BEAM --------------------------------------------------------------------------------------


def _beam_messages(chat: Path) -> list[dict[str, Any]]:
    return [m for b in json.loads(chat.read_text("utf-8")) for g in b["turns"] for m in g]


def test_beam_chat_file(event_log: EventLog, shared_data: Path) -> None:
    chat = shared_data / "beam/chats/100K/1/chat.json"
    report = ingest_path(event_log, chat)
    messages = _beam_messages(chat)
    assert (report.format, report.conversations, report.events_added) == ("beam", 1, len(messages))
    events = _task(event_log, "beam/100K/1")
    _assert_chat_invariants(events)
    assert [e.metadata["id"] for e in events] == [m["id"] for m in messages]
    first = events[0]
    assert first.session_id == "beam:100K/1:b1" and first.metadata["date"] == "2024-03-15"
    assert first.content.startswith("[Session 1 | 2024-03-15] user: I'm working on a project")
    assert first.metadata["index"] == "1,1" and first.metadata["question_type"] == "main_question"
    marked = [e for e in events if "marker" in e.metadata]
    assert marked and all(re.fullmatch(r"->->.*", e.metadata["marker"]) for e in marked)
    assert not any("->->" in e.content for e in events if e.role == "user")
    by_id = {m["id"]: m for m in messages}
    for event in marked:
        original = by_id[event.metadata["id"]]["content"]
        assert original.startswith(event.content.split(": ", 1)[1])


@pytest.mark.parametrize("level", ["chat", "tier"])
def test_beam_folders(event_log: EventLog, shared_data: Path, level: str) -> None:
    path = shared_data / ("beam/chats/100K/2" if level == "chat" else "beam/chats/100K")
    report = ingest_path(event_log, path)
    chats = sorted(path.rglob("chat.json"))
    assert report.format == "beam" and report.conversations == len(chats)
    assert report.events_added == sum(len(_beam_messages(c)) for c in chats)


def test_beam_chats_root_with_a_10m_plan_chat(
    event_log: EventLog, shared_data: Path, fixtures: Path, tmp_path: Path
) -> None:
    root = tmp_path / "chats"
    (root / "100K/3").mkdir(parents=True)
    (root / "100K/3/chat.json").symlink_to(shared_data / "beam/chats/100K/3/chat.json")
    shutil.copytree(fixtures / "beam_10m/10M", root / "10M")
    (root / "10M/1/topic.json").write_text('{"id": 1, "title": "garden"}', encoding="utf-8")
    report = ingest_path(event_log, root)
    assert report.conversations == 2
    events = _task(event_log, "beam/10M/1")
    _assert_chat_invariants(events)
    assert [e.session_id for e in events] == ["beam:10M/1:p1b1"] * 2 + ["beam:10M/1:p1b2"] * 2 + [
        "beam:10M/1:p2b1"
    ] * 4
    assert [e.step_index for e in events] == [1, 1, 2, 2, 3, 3, 3, 3]
    assert [e.metadata["plan"] for e in events] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert events[4].content == (
        "[Session 3 | 2024-03-11] user: The tomatoes sprouted in the cedar beds."
    )
    assert events[6].metadata["date"] == "2024-03-11"  # the follow-up shares its batch's date


# -- LongMemEval -------------------------------------------------------------------------------


def test_longmemeval_one_task_per_question_sessions_in_date_order(
    event_log: EventLog, fixtures: Path
) -> None:
    report = ingest_path(event_log, fixtures / "longmemeval_mini.json")
    assert (report.format, report.conversations, report.sessions) == ("longmemeval", 3, 7)
    events = _task(event_log, "longmemeval/7a1c2e90")
    _assert_chat_invariants(events)
    order = list(dict.fromkeys(e.metadata["haystack_session_id"] for e in events))
    assert order == ["sharegpt_xk3LmQ_0", "answer_7a1c2e90_1", "answer_7a1c2e90_2"]
    pottery = [e for e in events if "pottery" in e.content][0]
    assert pottery.session_id == "lme:7a1c2e90:answer_7a1c2e90_1"
    assert pottery.content.startswith("[Session 2 | 2023-05-18] user: I just got back")
    assert pottery.metadata["has_answer"] is True and pottery.metadata["answer_session"] is True
    assert [e.metadata.get("has_answer") for e in events if e.step_index == 2] == [
        True,
        None,
        False,
    ]


def test_longmemeval_assistant_evidence_and_abstention(event_log: EventLog, fixtures: Path) -> None:
    ingest_path(event_log, fixtures / "longmemeval_mini.json")
    moons = _task(event_log, "longmemeval/c93b5d41")
    evidence = [e for e in moons if e.metadata.get("has_answer")]
    assert [(e.role, e.metadata["turn"]) for e in evidence] == [("assistant", 2)]
    abstain = _task(event_log, "longmemeval/e5f08a17_abs")
    assert {e.metadata["question_id"] for e in abstain} == {"e5f08a17_abs"}
    assert len(abstain) == 4


# -- OpenAI-style chat -------------------------------------------------------------------------


def _tool_conversation() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Need the weather tool.\n",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": -3}'},
            {"role": "assistant", "content": "It is -3 °C.", "reasoning": {"effort": "low"}},
        ]
    }


def test_openai_tool_calls_results_and_reasoning(event_log: EventLog, tmp_path: Path) -> None:
    path = write_json(tmp_path / "weather.json", _tool_conversation())
    report = ingest_path(event_log, path)
    assert report.format == "openai"
    events = event_log.session_events("openai:weather")
    assert [(e.kind, e.role) for e in events] == [
        (Kind.CONVERSATION, "system"),
        (Kind.CONVERSATION, "user"),
        (Kind.TOOL_CALL, "assistant"),
        (Kind.TOOL_RESULT, "tool"),
        (Kind.CONVERSATION, "assistant"),
    ]
    call, result, answer = events[2], events[3], events[4]
    assert (call.tool_call_id, call.name, call.tool_input) == (
        "call_1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert call.metadata["reasoning_content"] == "Need the weather tool.\n"
    assert (result.tool_call_id, result.name) == ("call_1", "get_weather")
    assert answer.metadata["reasoning"] == {"effort": "low"}
    assert answer.content == "[Session 1] assistant: It is -3 °C."
    _assert_chat_invariants(events)


@pytest.mark.parametrize(
    "shape", ["list", "jsonl-messages", "jsonl-conversations", "list-of-convs"]
)
def test_openai_file_shapes(event_log: EventLog, tmp_path: Path, shape: str) -> None:
    messages = chat_messages(6)
    if shape == "list":
        path = write_json(tmp_path / "chat.json", messages)
    elif shape == "jsonl-messages":
        path = write_jsonl(tmp_path / "chat.jsonl", messages)
    elif shape == "jsonl-conversations":
        path = write_jsonl(
            tmp_path / "chat.jsonl", [{"messages": messages}, {"messages": messages}]
        )
    else:
        path = write_json(tmp_path / "chat.json", [{"id": "a", "messages": messages}])
    report = ingest_path(event_log, path)
    assert report.format == "openai"
    per_conversation = 2 if shape == "jsonl-conversations" else 1
    assert report.conversations == per_conversation
    assert report.events_added == 6 * per_conversation
    again = ingest_path(event_log, path)
    assert (again.events_added, again.events_skipped) == (0, 6 * per_conversation)


def test_detection_is_by_content_not_name(
    event_log: EventLog, tmp_path: Path, fixtures: Path
) -> None:
    chat = write_json(tmp_path / "locomo10.json", _tool_conversation())
    lme = tmp_path / "export.txt"
    lme.write_bytes((fixtures / "longmemeval_mini.json").read_bytes())
    assert ingest_path(event_log, chat).format == "openai"
    assert ingest_path(event_log, lme).format == "longmemeval"


def test_report_is_a_frozen_value(event_log: EventLog, fixtures: Path) -> None:
    report = ingest_path(event_log, fixtures / "longmemeval_mini.json")
    assert isinstance(report, IngestReport)
    with pytest.raises(AttributeError):
        report.events_added = 0  # type: ignore[misc]


def test_progress_is_called_after_each_batch(event_log: EventLog, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", chat_messages(25))
    seen: list[tuple[int, int | None]] = []

    def _progress(done: int, total: int | None) -> None:
        seen.append((done, total))
        assert imported_count(event_log) == done  # committed before it is reported

    ingest_path(event_log, path, progress=_progress, batch_size=10)
    assert seen == [(10, None), (20, None), (25, None)]


def test_undated_sessions(event_log: EventLog, tmp_path: Path) -> None:
    def turn(n: int, who: str) -> dict[str, str]:
        return {"speaker": who, "dia_id": f"D{n}:1", "text": f"turn of session {n}"}

    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1": [turn(1, "Ann")],
        "session_2": [turn(2, "Bo")],
        "session_2_date_time": "9:05 am on 3 March, 2024",
        "session_3": [turn(3, "Ann")],
    }
    path = write_json(tmp_path / "tiny.json", [{"sample_id": "x", "conversation": conversation}])
    ingest_path(event_log, path)
    first, second, third = _task(event_log, "locomo/x")
    assert first.content == "[Session 1] Ann: turn of session 1"
    assert "date" not in first.metadata and first.created_at.startswith("1970-01-01T00:00:00")
    assert second.metadata["date"] == "2024-03-03" and "date_inherited" not in second.metadata
    assert third.content == "[Session 3 | 2024-03-03] Ann: turn of session 3"
    assert third.metadata["date_inherited"] is True
    assert third.created_at.startswith("2024-03-03T09:05:01")
