"""Gold labels: LoCoMo evidence normalization and BEAM source id flattening."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollctx.bench import (
    beam_chats,
    flatten_source_ids,
    load_locomo,
    normalize_dia_id,
    resolve_evidence,
)
from scrollctx.errors import UsageError

KNOWN = {"D8:6", "D9:17", "D9:1", "D4:4", "D4:6", "D11:26", "D30:5", "D1:18", "D1:20", "D10:11"}


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("D30:05", "D30:5"),
        ("D:11:26", "D11:26"),
        ("D1:3", "D1:3"),
        ("D007:010", "D7:10"),
        ("D", None),
        ("", None),
        ("D4", None),
        ("session 4", None),
    ],
)
def test_normalize_dia_id(token: str, expected: str | None) -> None:
    assert normalize_dia_id(token) == expected


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        (["D8:6; D9:17"], {"D8:6", "D9:17"}),
        (["D9:1 D4:4 D4:6"], {"D9:1", "D4:4", "D4:6"}),
        (["D1:14", "D:11:26"], {"D11:26"}),
        (["D30:05"], {"D30:5"}),
        (["D1:18", "D", "D1:20"], {"D1:18", "D1:20"}),
        (["D10:11", "D10:19"], {"D10:11"}),
        (["D4:36"], set()),
        ([], set()),
    ],
)
def test_resolve_evidence_splits_normalizes_and_drops_unknown(
    evidence: list[str], expected: set[str]
) -> None:
    assert resolve_evidence(evidence, KNOWN) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([28, 29], ["28", "29"]),
        ({"first_statement": [58], "second_statement": [24]}, ["58", "24"]),
        ({"original_info": [86], "updated_info": [114, 86]}, ["86", "114"]),
        ([6, 62, 118, 118, 120], ["6", "62", "118", "120"]),
        (None, []),
        ([], []),
        ({"first_event": [], "second_event": []}, []),
    ],
)
def test_flatten_source_ids(value: object, expected: list[str]) -> None:
    assert flatten_source_ids(value) == expected


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _locomo_sample() -> dict[str, object]:
    turns = [{"speaker": "A", "dia_id": f"D1:{i}", "text": f"t{i}"} for i in range(1, 4)]
    return {
        "sample_id": "conv-x",
        "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": turns},
        "qa": [
            {"question": "q1", "answer": "a", "evidence": ["D1:02"], "category": 4},
            {"question": "q2", "adversarial_answer": "a", "evidence": ["D1:1"], "category": 5},
            {"question": "q3", "answer": "a", "evidence": [], "category": 2},
            {"question": "q4", "answer": "a", "evidence": ["D2:1"], "category": 1},
        ],
    }


def test_load_locomo_excludes_adversarial_and_unresolvable(tmp_path: Path) -> None:
    [conversation] = load_locomo(_write(tmp_path / "l.json", [_locomo_sample()]))
    assert [(p.qid, p.question, set(p.gold), p.group) for p in conversation.probes] == [
        ("conv-x#0", "q1", {"D1:2"}, "4")
    ]
    assert conversation.counts.total == 4
    assert conversation.counts.scored == 1
    assert conversation.counts.excluded == {
        "category 5 (adversarial)": 1,
        "no resolvable evidence": 2,
    }


def test_beam_chats_flatten_and_exclude_abstention(tmp_path: Path) -> None:
    folder = tmp_path / "chats" / "100K" / "1"
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "id": i, "content": "x"} for i in range(4)
    ]
    _write(folder / "chat.json", [{"batch_number": 1, "turns": [messages[:2], messages[2:]]}])
    _write(
        folder / "probing_questions" / "probing_questions.json",
        {
            "abstention": [{"question": "qa"}],
            "knowledge_update": [
                {"question": "qk", "source_chat_ids": {"original_info": [0], "updated_info": [3]}}
            ],
            "information_extraction": [{"question": "qi", "source_chat_ids": [99]}],
        },
    )
    _write(tmp_path / "chats" / "100K" / "2" / "topic.json", {})  # no chat file: skipped
    [chat] = beam_chats(tmp_path / "chats", ["100K"])
    assert chat.turn_ids == {"0", "1", "2", "3"}
    assert [(p.qid, set(p.gold), p.group) for p in chat.probes] == [
        ("beam/100K/1#knowledge_update/0", {"0", "3"}, "knowledge_update")
    ]
    assert chat.counts.excluded == {"abstention": 1, "no resolvable source_chat_ids": 1}


def test_unknown_beam_size_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown BEAM size '2M'"):
        beam_chats(tmp_path, ["2M"])


def test_bad_locomo_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UsageError, match="is not valid JSON"):
        load_locomo(path)
    with pytest.raises(UsageError, match="not a LoCoMo file"):
        load_locomo(_write(tmp_path / "obj.json", {"a": 1}))


def test_real_locomo_counts(shared_data: Path) -> None:
    conversations = load_locomo(shared_data / "locomo" / "locomo10.json")
    assert len(conversations) == 10
    assert sum(c.counts.total for c in conversations) == 1986
    assert sum(c.counts.excluded.get("category 5 (adversarial)", 0) for c in conversations) == 446
    for conversation in conversations:
        for probe in conversation.probes:
            assert probe.gold <= conversation.turn_ids
