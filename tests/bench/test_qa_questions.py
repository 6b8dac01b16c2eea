"""Question loaders on the LongMemEval fixture and real BEAM and LoCoMo files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scrollctx.bench import task_text
from scrollctx.bench._questions import (
    BEAM_ABILITIES,
    beam_questions,
    locomo_options,
    locomo_questions,
    longmemeval_questions,
)
from scrollctx.errors import FormatError, UsageError

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"
LME = FIXTURES / "longmemeval_mini.json"


def test_longmemeval_questions_and_their_histories(tmp_path: Path) -> None:
    questions = longmemeval_questions(LME, tmp_path)
    assert [q.qid for q in questions] == ["7a1c2e90", "c93b5d41", "e5f08a17_abs"]
    first = questions[0]
    assert (first.category, first.answer, first.question_date) == (
        "temporal-reasoning",
        "12 days",
        "2023/06/20 (Tue) 09:15",
    )
    assert questions[1].answer == "4"  # an integer answer becomes text
    assert questions[2].extra == {"abstention": True}
    history = first.history
    assert history.key == "longmemeval/7a1c2e90" and history.format == "longmemeval"
    assert history.path is not None
    saved = json.loads(history.path.read_text(encoding="utf-8"))
    assert len(saved) == 1 and saved[0]["question_id"] == "7a1c2e90"


def test_longmemeval_filters(tmp_path: Path) -> None:
    assert [q.qid for q in longmemeval_questions(LME, tmp_path, categories=["abstention"])] == [
        "e5f08a17_abs"
    ]
    assert len(longmemeval_questions(LME, tmp_path, limit=2)) == 2
    with pytest.raises(UsageError, match="unknown longmemeval category bogus"):
        longmemeval_questions(LME, tmp_path, categories=["bogus"])
    with pytest.raises(UsageError, match="not found"):
        longmemeval_questions(tmp_path / "missing.json", tmp_path)
    with pytest.raises(UsageError, match="at least 1"):
        longmemeval_questions(LME, tmp_path, limit=0)


def test_beam_questions_every_ability(shared_data: Path) -> None:
    chats = shared_data / "beam" / "chats"
    questions = beam_questions(chats, "128K", limit=20)
    assert {q.category for q in questions} == set(BEAM_ABILITIES)
    assert all(q.history.key == "beam/100K/1" for q in questions)
    assert questions[0].history.path == chats / "100K" / "1" / "chat.json"
    ordering = next(q for q in questions if q.category == "event_ordering")
    assert ordering.rubric == (
        "Core functionality",
        "Transaction error handling",
        "Security and deployment",
    )
    assert ordering.qid == "beam/100K/1/event_ordering/0"
    compliance = next(q for q in questions if q.category == "instruction_following")
    assert compliance.answer.startswith("Response should include code examples")


def test_beam_10m_has_questions_but_no_chats(shared_data: Path) -> None:
    questions = beam_questions(shared_data / "beam" / "chats", "10M", categories=["summarization"])
    assert len(questions) == 20  # 10 conversations x 2
    assert all(q.history.path is None for q in questions)
    with pytest.raises(UsageError, match="unknown BEAM size"):
        beam_questions(shared_data / "beam" / "chats", "2M")


def test_locomo_questions_categories(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "locomo" / "locomo10.json"
    adversarial = locomo_questions(path, tmp_path, categories=["5"], limit=3)
    assert all(q.answer == "Not mentioned in the conversation" for q in adversarial)
    assert all(q.extra["adversarial_answer"] for q in adversarial)
    everything = locomo_questions(path, tmp_path)
    assert len(everything) == 1986
    assert len({q.history.key for q in everything}) == 10
    assert everything[0].qid == "locomo/conv-26/0"


def test_questions_are_posed_with_the_benchmarks_own_additions(
    shared_data: Path, tmp_path: Path
) -> None:
    """LongMemEval gives the question's date; LoCoMo asks category 2 for an approximate date
    from the session dates and poses category 5 as a two-option choice; the rest go as written."""
    dated = longmemeval_questions(LME, tmp_path / "lme")[0]
    assert task_text(dated) == f"{dated.question}\n\n(Today is 2023/06/20 (Tue) 09:15.)"
    path = shared_data / "locomo" / "locomo10.json"
    temporal, adversarial, single_hop = (
        locomo_questions(path, tmp_path / code, categories=[code], limit=1)[0]
        for code in ("2", "5", "4")
    )
    assert task_text(temporal).startswith(temporal.question + "\n\n")
    assert "approximate date" in task_text(temporal) and "sessions" in task_text(temporal)
    option_a, option_b = locomo_options(adversarial)
    assert {option_a, option_b} == {
        "Not mentioned in the conversation",
        adversarial.extra["adversarial_answer"],
    }
    assert task_text(adversarial).endswith(f"(a) {option_a} (b) {option_b}")
    assert locomo_options(adversarial) == (option_a, option_b)  # the same order every time
    assert task_text(single_hop) == single_hop.question


def test_locomo_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(FormatError, match="not a LoCoMo file"):
        locomo_questions(bad, tmp_path)


def test_beam_10m_runs_once_its_chat_is_supplied(shared_data: Path, tmp_path: Path) -> None:
    """10M chats nest plans; with a chat.json beside the questions the history ingests."""
    import shutil

    from scrollctx.bench._histories import build_base_store

    chat = tmp_path / "chats" / "10M" / "1"
    shutil.copytree(
        shared_data / "beam" / "chats" / "10M" / "1" / "probing_questions",
        chat / "probing_questions",
    )
    shutil.copy(FIXTURES / "beam_10m" / "10M" / "1" / "chat.json", chat / "chat.json")
    questions = beam_questions(tmp_path / "chats", "10M")
    assert len(questions) == 20 and questions[0].history.path == chat / "chat.json"
    base = build_base_store(questions[0].history, tmp_path / "store")
    assert base.sessions > 1 and base.events > 0 and base.index_seq == base.events + 1


def test_beam_available_only_keeps_the_chats_that_exist(shared_data: Path) -> None:
    chats = shared_data / "beam" / "chats"
    every = beam_questions(chats, "1M")
    available = beam_questions(chats, "1M", available_only=True)
    assert len(every) == 700 and len(available) == 180
    assert all(q.history.path is not None for q in available)
    assert sum(q.history.path is None for q in every) == 520
