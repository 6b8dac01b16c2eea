"""The baselines' plain window and the carried index, on real Event Log files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import ScrollPolicy
from scrollctx.bench._histories import build_base_store, copy_store
from scrollctx.bench._policies import WindowPolicy
from scrollctx.bench._questions import longmemeval_questions
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import (
    INDEX_HEADER,
    EvictionIndex,
    carried_index,
    carried_session,
    estimate_tokens,
)

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"


def _call(index: int) -> dict[str, object]:
    call = {
        "id": f"c{index}",
        "type": "function",
        "function": {"name": "repl_exec", "arguments": '{"source": "print(1)"}'},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_window_drops_oldest_exchanges_whole_and_keeps_the_task(event_log: EventLog) -> None:
    policy = WindowPolicy(event_log, "s1", "system", budget_tokens=1200)
    assert policy.add({"role": "user", "content": "the task"})
    for index in range(6):
        policy.add(_call(index))  # type: ignore[arg-type]
        policy.add({"role": "tool", "tool_call_id": f"c{index}", "content": "word " * 300})
    prepared = policy.prepare("")
    roles = [m["role"] for m in prepared.messages]
    assert prepared.messages[0]["content"] == "the task"
    assert roles[1] == "assistant" and roles.count("assistant") == roles.count("tool") < 6
    assert prepared.tokens <= 1200 < prepared.tokens_before and prepared.evicted_turns > 0
    assert event_log.count() == 13  # everything was logged, nothing dropped from the log


def test_window_cuts_a_too_long_first_message_from_the_front(event_log: EventLog) -> None:
    policy = WindowPolicy(event_log, "s1", "", budget_tokens=1024)
    history = " ".join(f"turn{i}" for i in range(3000))
    policy.add({"role": "user", "content": history + " QUESTION?"})
    (message,) = policy.prepare("").messages
    text = str(message["content"])
    assert text.startswith("[the beginning of this message was cut")
    assert text.endswith("turn2999 QUESTION?") and "turn0 " not in text


def test_carried_index_opens_the_probe_view(tmp_path: Path) -> None:
    question = longmemeval_questions(FIXTURES / "longmemeval_mini.json", tmp_path, limit=1)[0]
    base = build_base_store(question.history, tmp_path / "base")
    assert (base.sessions, base.events) == (3, 9)
    again = build_base_store(question.history, tmp_path / "base")  # reused by its marker
    assert again == base
    probe = copy_store(base.path, tmp_path / "probe")
    with EventLog.open(probe / "history.db") as log:
        data = carried_index(log, question.history.key)
        assert data is not None
        index = EvictionIndex.from_data(data)
        assert [b.lo for b in index.blocks()][0] == 1 and index.counters["evictions"] == 3
        policy = ScrollPolicy.open(log, "probe-1", "system", budget_tokens=8000, initial_index=data)
        prepared = policy.prepare("")
        first = str(prepared.messages[0]["content"])
        assert first.startswith(INDEX_HEADER) and "[Session 1 | 2023-05-01]" in first
        # The handover is the probe session's own first index event (restorable after a restart).
        rows = log.execute(
            "SELECT seq, session_id FROM conversation_history WHERE kind = 'eviction_index' "
            "ORDER BY seq"
        )
        assert [r["session_id"] for r in rows] == [carried_session(question.history.key), "probe-1"]


def test_a_transformed_store_counts_the_original_history_as_its_corpus(tmp_path: Path) -> None:
    question = longmemeval_questions(FIXTURES / "longmemeval_mini.json", tmp_path, limit=1)[0]

    def one_line_per_session(events: list[NewEvent]) -> tuple[list[NewEvent], int, int]:
        return [dataclasses.replace(events[0], content="short", dedup_key="summary")], 7, 3

    raw = build_base_store(question.history, tmp_path / "raw")
    lossy = build_base_store(question.history, tmp_path / "lossy", transform=one_line_per_session)
    assert (lossy.events, lossy.ingest_tokens_in, lossy.ingest_tokens_out) == (3, 21, 9)
    assert lossy.corpus_tokens == raw.corpus_tokens > 3 * estimate_tokens("short")


def test_the_noindex_store_holds_no_index_at_all(tmp_path: Path) -> None:
    question = longmemeval_questions(FIXTURES / "longmemeval_mini.json", tmp_path, limit=1)[0]
    base = build_base_store(question.history, tmp_path / "base", with_index=False)
    assert (base.sessions, base.events, base.index_seq) == (3, 9, None)
    with EventLog.open(base.db_path) as log:
        assert carried_index(log, question.history.key) is None
        assert log.execute("SELECT count(*) AS n FROM conversation_history")[0]["n"] == 9


def test_the_summarization_agent_compacts_its_context_during_the_run(
    event_log: EventLog, openai_server: ScriptedOpenAIServer
) -> None:
    """When the context passes rho of the window, the older exchanges (all but the last two)
    are folded by the backbone into notes carried in the task message; the summary is logged,
    its tokens counted, and roles still alternate (user, assistant, tool, ...)."""
    from scrollctx.agent import resolve_model
    from scrollctx.bench._compaction import COMPACTION_PROMPT, CompactingPolicy
    from scrollctx.bench._summaries import Summarizer

    backend = resolve_model("openai:summarizer", environ=openai_server.environ)
    summarizer = Summarizer(backend, prompt=COMPACTION_PROMPT)
    policy = CompactingPolicy(event_log, "s1", "system", budget_tokens=2000, summarizer=summarizer)
    policy.add({"role": "user", "content": "the task"})
    for index in range(3):
        policy.add(_call(index))  # type: ignore[arg-type]
        policy.add({"role": "tool", "tool_call_id": f"c{index}", "content": "word " * 200})
    assert policy.prepare("").evicted is False  # 3 x 200 words: under 0.8 x 2000
    policy.add(_call(3))  # type: ignore[arg-type]
    policy.add({"role": "tool", "tool_call_id": "c3", "content": "word " * 1200})
    openai_server.enqueue_text("Notes: c0 and c1 printed words.", usage=(321, 12))
    prepared = policy.prepare("")
    (request,) = openai_server.requests
    folded = str(request.body["messages"][0]["content"])
    assert folded.startswith("You keep the working notes of an agent")
    assert folded.count("[call repl_exec(") == 2  # the two oldest exchanges, not the last two
    roles = [m["role"] for m in prepared.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool"]
    first = str(prepared.messages[0]["content"])
    assert first.startswith("the task") and first.endswith("Notes: c0 and c1 printed words.")
    assert (policy.compactions, policy.tokens_in, policy.tokens_out) == (1, 321, 12)
    (note,) = event_log.execute(
        "SELECT content, json_extract(metadata, '$.compaction.turns') AS turns "
        "FROM conversation_history WHERE json_extract(metadata, '$.compaction') IS NOT NULL"
    )
    assert note["content"] == "Notes: c0 and c1 printed words." and note["turns"] == 4
