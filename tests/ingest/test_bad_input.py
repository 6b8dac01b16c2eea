"""Bad input gets a clear FormatError naming the file and loses nothing already written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ingest_helpers import chat_messages, imported_count, write_json

from scrollctx.errors import FormatError, UsageError
from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog


@pytest.fixture
def seeded(event_log: EventLog, tmp_path: Path) -> EventLog:
    """A log that already holds one imported chat, to prove failures leave it intact."""
    ingest_path(event_log, write_json(tmp_path / "seed.json", chat_messages(5, tag="seed")))
    return event_log


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BAD_FILES = {
    # case: (bytes, message, events before the problem, which are kept)
    "malformed": (b'[{"role": "user", "content": "hi"}, {"role": oops}]', "not valid JSON", 1),
    "truncated": (b'[{"role": "user", "content": "hi"}, {"role": "user", "con', "truncated", 1),
    "unknown schema": (b'[{"title": "a recipe", "steps": []}]', "matches no known format", 0),
    "not utf-8": ('[{"role": "user", "content": "café"}]'.encode("latin-1"), "not UTF-8", 0),
    "empty": (b"", "is empty", 0),
    "whitespace only": (b"  \n\n", "is empty", 0),
    "empty array": (b"[]", "empty JSON array", 0),
    "not json": (b"role,content\nuser,hi\n", "not JSON or JSONL", 0),
    "nested too deeply": (
        b'[{"role": "user", "content": "hi"}, ' + b"[" * 100_000 + b"]" * 100_000 + b"]",
        "nested too deeply",
        1,
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file(seeded: EventLog, tmp_path: Path, case: str) -> None:
    data, needle, kept = BAD_FILES[case]
    path = _write(tmp_path / "bad.json", data)
    before = imported_count(seeded)
    seed_rows = seeded.span(1, seeded.last_seq())
    with pytest.raises(FormatError, match=needle) as caught:
        ingest_path(seeded, path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 2
    if kept:
        assert f"({kept} new events read from bad.json before the problem were kept" in str(
            caught.value
        )
    seeded.check()
    assert imported_count(seeded) == before + kept
    assert seeded.span(1, seed_rows[-1].seq) == seed_rows


def test_jsonl_line_nested_too_deeply(seeded: EventLog, tmp_path: Path) -> None:
    deep = b'{"role": "user", "content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    path = _write(tmp_path / "deep.jsonl", b'{"role": "user", "content": "hi"}\n' + deep + b"\n")
    with pytest.raises(FormatError, match=r"line 2 is not valid JSON \(nested too deeply"):
        ingest_path(seeded, path)
    seeded.check()


def test_tool_arguments_nested_too_deeply_stay_text(seeded: EventLog, tmp_path: Path) -> None:
    arguments = "[" * 100_000 + "]" * 100_000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    ingest_path(seeded, write_json(tmp_path / "deep.json", {"messages": messages}))
    assert seeded.session_events("openai:deep")[-1].tool_input == arguments


def test_a_name_or_text_that_is_not_unicode_is_imported_escaped(
    seeded: EventLog, tmp_path: Path
) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    chat = json.dumps(
        [{"role": "user", "content": "half a pair \ud800"}] + chat_messages(1)
    ).encode()
    _write(folder / "escaped.json", chat)
    _write(folder / os.fsdecode(b"named-\xff.json"), chat)  # a name os.fsdecode cannot decode
    report = ingest_path(seeded, folder)
    assert (report.events_added, report.problems) == (4, [])
    rows = seeded.execute("SELECT DISTINCT session_id, content FROM conversation_history "
                          "WHERE content LIKE '%half a pair%'")  # fmt: skip
    assert {(r["session_id"], r["content"]) for r in rows} == {
        ("openai:escaped", "[Session 1] user: half a pair \\ud800"),
        ("openai:named-\\udcff", "[Session 1] user: half a pair \\ud800"),
    }
    seeded.check()


def test_missing_path(seeded: EventLog, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="does not exist"):
        ingest_path(seeded, tmp_path / "nowhere.json")


def test_folder_with_nothing_importable(seeded: EventLog, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello", encoding="utf-8")
    write_json(folder / "topic.json", {"id": 1, "title": "not a chat"})
    with pytest.raises(FormatError, match="no importable file"):
        ingest_path(seeded, folder)


def test_forced_format_that_does_not_fit(seeded: EventLog, tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", chat_messages(3))
    with pytest.raises(FormatError, match="does not look like locomo"):
        ingest_path(seeded, path, format="locomo")


def test_unknown_format_name_and_bad_batch_size(seeded: EventLog, tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", chat_messages(3))
    with pytest.raises(UsageError, match="unknown format 'csv'"):
        ingest_path(seeded, path, format="csv")
    with pytest.raises(UsageError, match="batch_size"):
        ingest_path(seeded, path, batch_size=0)


def test_bad_record_deep_in_a_file(seeded: EventLog, tmp_path: Path) -> None:
    conversations = [{"id": f"c{i}", "messages": chat_messages(4)} for i in range(5)]
    conversations[3]["messages"][2] = {"content": "a message without a role"}
    path = write_json(tmp_path / "convs.json", conversations)
    with pytest.raises(FormatError, match="message 3 of openai:convs:c3 needs 'role'"):
        ingest_path(seeded, path, batch_size=4)
    seeded.check()


def test_truncated_file_keeps_what_was_read_and_reimport_completes(
    seeded: EventLog, tmp_path: Path
) -> None:
    messages = chat_messages(50, tag="long")
    whole = json.dumps(messages, indent=1)
    cut = whole.index('"long message number 30"')
    path = _write(tmp_path / "long.json", whole[:cut].encode())
    before = imported_count(seeded)
    with pytest.raises(FormatError, match="truncated.*30 new events .* were kept"):
        ingest_path(seeded, path, batch_size=10)
    seeded.check()
    kept = seeded.execute(
        "SELECT content FROM conversation_history WHERE session_id = 'openai:long' ORDER BY seq"
    )
    assert [row["content"] for row in kept] == [
        f"[Session 1] {m['role']}: {m['content']}" for m in messages[:30]
    ]
    assert imported_count(seeded) == before + 30
    path.write_text(whole, encoding="utf-8")
    report = ingest_path(seeded, path, batch_size=10)
    assert (report.events_added, report.events_skipped) == (20, 30)
    assert imported_count(seeded) == before + 50
