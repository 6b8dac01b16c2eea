"""Prompts name only the tools a run has; the policy's index seam; who closes a backend; what a
memory probe leaves searchable. Real Event Log files, real HTTP to the scripted server."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import (
    Agent,
    Backend,
    PromptSet,
    ScrollPolicy,
    Toolset,
    build_system_prompt,
    json_memory_toolset,
    scroll_toolset,
)
from scrollctx.agent._prompts import render_index_header
from scrollctx.errors import UsageError
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import INDEX_HEADER, INDEX_KIND, EvictionIndex, IndexBlock, IndexLine

TASK = "beam/100K/1"
_TOOL_NAMES = ("repl_exec", "recall_history_python", "ms_search", "ms_expand", "ms_sql_query")


def _only(toolset: Toolset, *names: str) -> Toolset:
    return Toolset(tuple(t for t in toolset.tools if t.name in names))


TOOLSETS = {
    "scroll": scroll_toolset(),
    "norepl": json_memory_toolset(),
    "retrieval": _only(json_memory_toolset(), "ms_search", "submit_answer"),
    "codeact": _only(scroll_toolset(), "repl_exec", "submit_answer"),
    "answer-only": _only(scroll_toolset(), "submit_answer"),
}


def _prompt(toolset: Toolset, mode: str, *, index: bool, rubric: str | None = None) -> str:
    return build_system_prompt(
        mode,
        tool_lines=toolset.prompt_lines(),
        rubric=rubric,
        task_id=TASK if mode == "ask" else None,
        capabilities=toolset.capabilities(index=index),
    )


@pytest.mark.parametrize("name", TOOLSETS)
@pytest.mark.parametrize("mode", ["ask", "run", "chat"])
@pytest.mark.parametrize("index", [True, False])
def test_a_prompt_names_only_the_tools_the_run_has(name: str, mode: str, index: bool) -> None:
    toolset = TOOLSETS[name]
    have = {t.name for t in toolset.tools}
    for rubric in ("beam", "locomo", "longmemeval") if mode == "ask" else (None,):
        prompt = _prompt(toolset, mode, index=index, rubric=rubric)
        for missing in set(_TOOL_NAMES) - have:
            assert f"{missing}" not in prompt, (name, mode, rubric, missing)
        mentions_ms = re.search(r"`ms`|\bms\.\w", prompt) is not None
        assert mentions_ms == ("recall_history_python" in have), (name, mode, rubric)
        assert ("kernel" in prompt) == ("repl_exec" in have or "recall_history_python" in have)
        assert ("eviction index" in prompt) == index, (name, mode)
        assert re.search(r"\$\w", prompt) is None  # every placeholder was filled
        assert "Abstain when the evidence is absent" in prompt


def test_rules_are_numbered_and_the_index_rule_follows_the_policy() -> None:
    with_index = _prompt(scroll_toolset(), "ask", index=True)
    without = _prompt(scroll_toolset(), "ask", index=False)
    numbers = re.findall(r"^(\d+)\. ", without, flags=re.MULTILINE)
    assert numbers == [str(n) for n in range(1, len(numbers) + 1)] and len(numbers) == 5
    assert "2. Read the index." in with_index and "Read the index" not in without
    json_prompt = _prompt(json_memory_toolset(), "ask", index=True)
    assert "recover a span with `ms_expand(lo=..., hi=...)`" in json_prompt
    assert "Recall with your memory tools: `ms_search`, `ms_expand`, `ms_sql_query`" in json_prompt


def test_memory_questions_get_the_papers_recall_rules() -> None:
    """Appendix C's instructions, and no rule that contradicts them (the former "read the turn
    that states it with ms.expand before you state a fact")."""
    scroll = _prompt(scroll_toolset(), "ask", index=True, rubric="beam")
    for phrase in (
        "start with k=5 or k=10",
        "Do not call ms.expand just to pair a user turn with the reply",
        "expand only its exact seq neighbours: ms.expand(seq - 1, seq + 1)",
        "Do not add up repeated mentions",
        "the same project and the same fact",
        "follow any count or format the question sets",
        "search for each one on its own",
    ):
        assert phrase in scroll, phrase
    assert "(`ms.expand`) and note its seq" not in scroll
    assert "Before you state a fact, read the turn" not in scroll
    norepl = _prompt(json_memory_toolset(), "ask", index=True, rubric="longmemeval")
    assert "ms_expand(lo=seq - 1, hi=seq + 1)" in norepl and "ms.expand" not in norepl
    bare = _prompt(TOOLSETS["answer-only"], "ask", index=False, rubric="locomo")
    assert "Recalling imported history" not in bare
    assert "Recalling imported history" not in _prompt(scroll_toolset(), "run", index=True)


def test_the_index_header_names_only_the_tools_the_run_has() -> None:
    scroll = render_index_header(scroll_toolset().capabilities())
    assert "ms.expand(lo, hi) in recall_history_python" in scroll
    assert scroll.split(". ")[0] == INDEX_HEADER.split(". ")[0]
    norepl = render_index_header(json_memory_toolset().capabilities())
    assert "ms_expand(lo=..., hi=...)" in norepl and 'ms_search(query="words")' in norepl
    assert "recall_history_python" not in norepl and "ms." not in norepl
    bare = render_index_header(TOOLSETS["answer-only"].capabilities())
    assert "no tool to read them back" in bare and re.search(r"\bms\b|\bms[._]", bare) is None


def _block(lo: int, hi: int, text: str) -> EvictionIndex:
    index = EvictionIndex(4, "ingest")
    index.add(IndexBlock([IndexLine(lo, hi, "turn", text)]), hi - lo + 1)
    return index


def _index_events(log: EventLog, session: str) -> list[int]:
    rows = log.execute(
        "SELECT seq FROM conversation_history WHERE session_id = ? AND kind = ? ORDER BY seq",
        (session, INDEX_KIND),
    )
    return [int(row["seq"]) for row in rows]


def test_a_new_session_starts_from_a_given_index_and_keeps_it_across_a_restart(
    event_log: EventLog,
) -> None:
    seqs = event_log.append_many(
        NewEvent(session_id="old", kind="conversation", role="user", content=f"turn {n}")
        for n in range(4)
    )
    given = _block(seqs[0], seqs[-1], "the four old turns about sprints")

    policy = ScrollPolicy.open(
        event_log, "probe", "system", budget_tokens=8000, initial_index=given
    )
    policy.add({"role": "user", "content": "When does the sprint end?"})
    first = str(policy.prepare("").messages[0]["content"])
    assert first.startswith(INDEX_HEADER) and "the four old turns about sprints" in first
    assert f"{seqs[0]}-{seqs[-1]}" in first or f"{seqs[0]}…{seqs[-1]}" in first
    (handover,) = _index_events(event_log, "probe")
    assert handover < event_log.last_seq()  # persisted first, before the question

    restarted = ScrollPolicy.open(event_log, "probe", "system", budget_tokens=8000)
    messages = restarted.prepare("").messages
    assert str(messages[0]["content"]) == first  # the index, then the question, one message
    assert len(messages) == 1 and first.endswith("\n\nWhen does the sprint end?")

    again = ScrollPolicy.open(event_log, "probe", "system", budget_tokens=8000, initial_index=given)
    assert _index_events(event_log, "probe") == [handover]  # an existing session keeps its own
    assert again.index_text() == restarted.index_text()


def test_a_malformed_initial_index_is_refused_and_nothing_is_written(
    event_log: EventLog,
) -> None:
    before = event_log.last_seq()
    with pytest.raises(UsageError, match="initial_index is not an eviction index"):
        ScrollPolicy.open(
            event_log, "probe", "system", budget_tokens=8000, initial_index={"tiers": "x"}
        )
    assert event_log.last_seq() == before


def test_a_given_index_header_replaces_the_views_header(event_log: EventLog) -> None:
    header = render_index_header(json_memory_toolset().capabilities())
    policy = ScrollPolicy.open(
        event_log,
        "probe",
        "system",
        budget_tokens=8000,
        initial_index=_block(1, 3, "three turns"),
        index_header=header,
    )
    policy.add({"role": "user", "content": "q"})
    first = str(policy.prepare("").messages[0]["content"])
    assert first.startswith(header) and INDEX_HEADER not in first
    assert "three turns" in first and first == policy.index_text() + "\n\nq"


def test_an_agent_closes_only_the_backend_it_created(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    closed: list[str] = []
    original = type(scripted_backend).close

    def counting_close(self: Backend) -> None:
        closed.append(self.model)
        original(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(scripted_backend), "close", counting_close)
        for answer in ("one", "two"):  # one backend, two agents, still usable after the first
            openai_server.enqueue_tool_calls([("submit_answer", {"answer": answer})])
            with Agent(model=scripted_backend, store=beam_store) as agent:
                assert not agent.owns_backend
                assert agent.run("Answer.").answer == answer
        assert closed == []
        with Agent(
            model="openai:made-here", store=beam_store, environ=openai_server.environ
        ) as agent:
            assert agent.owns_backend
        assert closed == ["made-here"]
    scripted_backend.close()


def test_a_memory_probe_keeps_its_own_turns_out_of_search(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    question = "Which zebrafinch quokka did I name?"
    cell = (
        "print([len(ms.search('zebrafinch quokka')), len(ms.search('sprint', k=3)), "
        'len(ms.sql_query("SELECT seq FROM hist.conversation_history '
        "WHERE content LIKE '%zebrafinch quokka%'\"))])"
    )
    openai_server.enqueue_tool_calls([("recall_history_python", {"source": cell})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "none"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.ask(question, task_id=TASK)

    observation = next(
        m["content"] for m in openai_server.requests[1].body["messages"] if m["role"] == "tool"
    )
    # No scope or kind given: the question is not found by search, the history still is, and
    # the question stays readable by SQL (it is in the log, only out of full-text search).
    printed = observation.removeprefix("stdout:\n").split("\n\n[namespace digest]")[0]
    assert json.loads(printed) == [0, 3, 1]
    conn = sqlite3.connect(beam_store / "history.db")
    try:
        flags = conn.execute(
            "SELECT DISTINCT searchable FROM conversation_history WHERE session_id = ?",
            (finished.session_id,),
        ).fetchall()
    finally:
        conn.close()
    assert flags == [(0,)]


def test_a_run_keeps_its_turns_searchable(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])
    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Remember the word zebrafinch.")
    conn = sqlite3.connect(beam_store / "history.db")
    try:
        (found,) = conn.execute(
            "SELECT count(*) FROM conversation_history WHERE session_id = ? AND searchable = 1 "
            "AND content LIKE '%zebrafinch%'",
            (finished.session_id,),
        ).fetchone()
    finally:
        conn.close()
    assert found == 1


def test_an_agent_that_cannot_open_its_store_closes_the_backend_it_made(
    tmp_path: Path, openai_server: ScriptedOpenAIServer
) -> None:
    from scrollctx.agent import register, unregister
    from scrollctx.agent.backends._openai import OpenAIBackend
    from scrollctx.errors import ScrollError

    made: list[Backend] = []
    closed: list[Backend] = []

    class Recorded(OpenAIBackend):
        name = "recorded"

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

        def close(self) -> None:
            closed.append(self)
            super().close()

    store = tmp_path / "store"
    store.mkdir()
    (store / "history.db").write_bytes(b"this is not an SQLite file" * 100)
    register("recorded", Recorded)
    try:
        with pytest.raises(ScrollError):
            Agent(model="recorded:m", store=store, environ=openai_server.environ)
    finally:
        unregister("recorded")
    assert len(made) == 1 and closed == made


def test_user_prompt_files_replace_ours_and_reach_the_model(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "system.md").write_text("You are the reproduction agent. Tools:\n$tool_list\n")
    (folder / "rubric_beam.md").write_text("[ms] Use ms.search. Amounts like $$68,000 stay.\n")
    prompts = PromptSet.load(folder)
    assert prompts.replaced == {
        "system": str(folder / "system.md"),
        "rubric_beam": str(folder / "rubric_beam.md"),
    }
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "none"})])
    with Agent(model=scripted_backend, store=beam_store, prompts=folder) as agent:
        agent.ask("Which sprint?", task_id=TASK, rubric="beam")
    system = openai_server.requests[0].body["messages"][0]["content"]
    assert system.startswith("You are the reproduction agent. Tools:\n- `repl_exec")
    assert "Use ms.search. Amounts like $68,000 stay." in system
    assert "Context-management rules" in system  # the files not replaced are ours


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("system.md", "Be helpful.", "missing $tool_list"),
        ("rules.md", "Rules.\n$headline_protocol\n$budget", "unknown $budget"),
        ("rubric_beam.md", "Costs $68,000.", "write '$$' for a dollar sign"),
        ("tools.md", "## repl_exec\nRun code.", "tools.md is not a prompt that can be replaced"),
    ],
)
def test_bad_prompt_files_are_refused_before_anything_runs(
    tmp_path: Path, beam_store: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        Agent(model="openai:never-called", store=beam_store, prompts=tmp_path, environ={})
    assert not (beam_store / "traces").exists()
