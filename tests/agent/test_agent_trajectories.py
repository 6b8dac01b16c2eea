"""Replayed trajectories modelled on the paper's Appendix D, over real HTTP and a real store.

The scripted server plays the model; the kernel, ``ms``, the working view and the Event Log are
real. Each test checks what reached the model (the recorded request bodies: only printed
output), what was logged, and the answer and trace.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from scripted_servers import (
    ScriptedAnthropicServer,
    ScriptedOpenAIServer,
    observed,
    tool_messages,
)

from scrollctx.agent import (
    Agent,
    Backend,
    ModelStep,
    RunFinished,
    TextDelta,
    ToolStep,
    json_memory_toolset,
    tool,
)
from scrollctx.kernel import NAMESPACE_LOST

TASK = "beam/100K/1"


def _rows(store: Path, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(store / "history.db")
    conn.row_factory = sqlite3.Row
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def _recall(source: str) -> tuple[str, dict[str, str]]:
    return ("recall_history_python", {"source": source})


def test_search_sql_filter_expand_submit(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    # The independent expectation: session 1's user turns that mention a sprint, in seq order.
    expected = _rows(
        beam_store,
        "SELECT seq, content FROM conversation_history WHERE kind = 'conversation' "
        "AND step_index = 1 AND role = 'user' AND lower(content) LIKE '%sprint%' ORDER BY seq",
    )
    assert len(expected) >= 2
    first = expected[0]
    assert len(first["content"]) > 300
    openai_server.enqueue_tool_calls(
        [_recall("hits = ms.search('sprint', kind='conversation', scope='task', k=5)\n"
                 "print(len(hits), sorted({h['step_index'] for h in hits}))")],
        text="Searching.\n⟦ find sprint turns | nothing verified yet | search | in_progress ⟧",
    )  # fmt: skip
    openai_server.enqueue_tool_calls(
        [_recall("rows = ms.sql_query(\"SELECT seq, role, content FROM hist.conversation_history "
                 "WHERE kind='conversation' AND step_index = 1 ORDER BY msg_index\")\n"
                 "print(len(rows))")]
    )  # fmt: skip
    openai_server.enqueue_tool_calls(
        [_recall("users = [r for r in rows if r['role'] == 'user' and 'sprint' in "
                 "r['content'].lower()]\nprint([u['seq'] for u in users])")]
    )  # fmt: skip
    openai_server.enqueue_tool_calls(
        [_recall("full = ms.expand(users[0]['seq'])\nprint(full[0]['content'][:120])")]
    )
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "Sprint turns found."})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        events = list(agent.iter_ask("Which turns talk about sprints?", task_id=TASK))

    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.answer) == ("answered", "Sprint turns found.")
    bodies = [r.body for r in openai_server.requests]
    assert len(bodies) == 5
    # What reached the model: exactly the printed output of each cell, nothing of the rows.
    session_rows = _rows(
        beam_store,
        "SELECT count(*) FROM conversation_history WHERE kind='conversation' AND step_index=1",
    )[0][0]
    assert tool_messages(bodies[2])[-1] == f"stdout:\n{session_rows}"
    assert tool_messages(bodies[3])[-1] == f"stdout:\n{[r['seq'] for r in expected]}"
    assert tool_messages(bodies[4])[-1] == "stdout:\n" + first["content"][:120].rstrip("\n")
    wire = json.dumps(bodies, ensure_ascii=False)
    assert first["content"][130:300] not in wire
    # The namespace digest shows the cached variables, not their contents.
    digest = bodies[4]["messages"][-1]["content"]
    assert "rows: ResultRows[dict]" in digest and f"len={session_rows}" in digest
    # The headline was stripped for display and bound to the model turn's event.
    step0 = next(e for e in events if isinstance(e, ModelStep))
    assert step0.text == "Searching." and step0.headline is not None
    logged = _rows(beam_store, "SELECT headline FROM conversation_history WHERE seq = ?",
                   (step0.seq,))  # fmt: skip
    assert logged[0]["headline"] == step0.headline
    # What was logged: every model call and observation, recall echoes kept out of search.
    session = finished.session_id
    kinds = _rows(
        beam_store,
        "SELECT kind, searchable, task_id, run_id FROM conversation_history "
        "WHERE session_id = ? AND kind IN ('model_turn', 'tool_result') ORDER BY seq",
        (session,),
    )
    assert [r["kind"] for r in kinds] == ["model_turn", "tool_result"] * 5
    assert all(r["task_id"] is None and r["run_id"] == finished.run_id for r in kinds)
    recall_results = [r for r in kinds if r["kind"] == "tool_result"][:4]
    assert all(r["searchable"] == 0 for r in recall_results)
    end = _rows(beam_store, "SELECT metadata FROM conversation_history WHERE seq = ?",
                (finished.seq,))  # fmt: skip
    assert json.loads(end[0]["metadata"])["run_end"]["status"] == "answered"
    # The trace has the appendix's shape.
    assert finished.trace_path is not None
    trace = json.loads(finished.trace_path.read_text(encoding="utf-8"))
    assert trace["task_id"] == TASK
    assert trace["metrics"]["step_count"] == 5
    assert (trace["metrics"]["tokens_in"], trace["metrics"]["tokens_out"]) == (50, 25)
    assert [s["action"]["tool"] for s in trace["steps"]] == ["recall_history_python"] * 4 + [
        "submit_answer"
    ]
    assert trace["steps"][2]["observation"] == f"stdout:\n{[r['seq'] for r in expected]}"
    assert [s["step_index"] for s in trace["steps"]] == [0, 1, 2, 3, 4]


def test_a_model_without_tool_calls_runs_its_fenced_code(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("Let me count.\n```python\nn = 6 * 7\nprint(n)\n```")
    openai_server.enqueue_text("```python\nsubmit_answer(f'the answer is {n}')\n```")

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Compute six times seven.")

    assert (finished.status, finished.answer) == ("answered", "the answer is 42")
    second = openai_server.requests[1].body["messages"]
    observation = [m for m in second if m["role"] == "user"][-1]  # the digest closes it
    assert observed(observation["content"]) == "Observation (repl_exec):\nstdout:\n42"


def test_user_tools_in_the_kernel_and_for_the_model(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    orders = {"A1": {"total": 31.5, "items": ["darjeeling-oolong"] * 500}}

    @tool
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Return the order with this id."""
        return orders[order_id]

    @tool(expose="model")
    def weather(city: str) -> str:
        """Return today's weather in a city."""
        return f"sunny in {city}"

    openai_server.enqueue_tool_calls(
        [("repl_exec", {"source": "o = lookup_order('A1')\nprint(o['total'])"})]
    )
    openai_server.enqueue_tool_calls([("weather", {"city": "Oslo"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "31.5, sunny"})])

    with Agent(model=scripted_backend, store=beam_store, tools=[lookup_order, weather]) as agent:
        finished = agent.run("Total of order A1, and the weather in Oslo?")

    assert finished.answer == "31.5, sunny"
    first = openai_server.requests[0].body
    assert [t["function"]["name"] for t in first["tools"]] == [
        "repl_exec", "recall_history_python", "submit_answer", "weather",
    ]  # fmt: skip
    assert (
        "`lookup_order(order_id: str) -> dict[str, Any]`: Return the order"
        in (first["messages"][0]["content"])
    )
    assert tool_messages(openai_server.requests[1].body) == ["stdout:\n31.5"]
    assert tool_messages(openai_server.requests[2].body)[-1] == "sunny in Oslo"
    assert "darjeeling" not in json.dumps([r.body for r in openai_server.requests])
    bridged = _rows(
        beam_store,
        "SELECT kind, name FROM conversation_history WHERE session_id = ? AND name = "
        "'lookup_order'",
        (finished.session_id,),
    )
    assert [r["kind"] for r in bridged] == ["tool_call", "tool_result"]


def test_scroll_without_the_repl_uses_json_memory_tools(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    search = {"query": "sprint", "k": 2, "mode": "hybrid"}
    openai_server.enqueue_tool_calls([("ms_search", search)])
    openai_server.enqueue_tool_calls([("ms_expand", {"lo": 29, "hi": 30})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])

    with Agent(model=scripted_backend, store=beam_store, toolset=json_memory_toolset) as agent:
        finished = agent.ask("Sprints?", task_id=TASK)

    assert finished.answer == "done"
    names = [t["function"]["name"] for t in openai_server.requests[0].body["tools"]]
    assert names == ["ms_search", "ms_expand", "ms_sql_query", "submit_answer"]
    found, note = tool_messages(openai_server.requests[1].body)[0].rsplit("\n[note] ", 1)
    hits = json.loads(found)
    assert len(hits) == 2 and all("sprint" in h["snippet"].lower() for h in hits)
    # The store has no vectors: the hybrid request says so and BM25 answers.
    assert {h["channel"] for h in hits} == {"bm25"} and "scroll embed" in note
    expanded = json.loads(tool_messages(openai_server.requests[2].body)[-1])
    assert [row["seq"] for row in expanded] == [29, 30]


def test_a_kernel_crash_mid_run_is_an_observation_and_the_run_continues(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "x = 41"})])
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "import os\nos._exit(3)"})])
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "print(x + 1)"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "recovered"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        events = list(agent.iter_run("Crash and recover."))

    observations = [e.observation for e in events if isinstance(e, ToolStep)]
    assert NAMESPACE_LOST in observations[1]
    assert "NameError" in observations[2]
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.answer == "recovered"


def test_secrets_never_reach_the_log_or_the_trace(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Say ok.")

    assert finished.trace_path is not None
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-scripted-test-key"
    for path in [beam_store / "history.db", finished.trace_path]:
        assert b"sk-scripted-test-key" not in path.read_bytes()


def test_the_trace_redacts_configured_secrets_and_nothing_else(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    """Only the values the run was configured with are redacted: a key in the environment
    that a cell prints, and a key in config.toml the model repeats; ordinary words that look
    like credentials ("basic transaction CRUD", "token: 42") stay as they were."""
    env_key, file_key = "sk-env-0123456789abcdef", "cfg-key-9876543210"
    (beam_store / "config.toml").write_text(
        f'[backends.other]\napi_key = "{file_key}"\n', encoding="utf-8"
    )
    task = "Plan the basic transaction CRUD; the token: 42 budget stays; password = hunter2."
    cell = f"print('{env_key}', 'basic transaction CRUD')"
    openai_server.enqueue_tool_calls([("repl_exec", {"source": cell})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": f"done, {file_key}"})])
    environ = {**openai_server.environ, "OPENAI_API_KEY": env_key}
    with Agent(model="openai:m", store=beam_store, environ=environ) as agent:
        finished = agent.run(task)
    assert finished.trace_path is not None
    trace = json.loads(Path(finished.trace_path).read_text(encoding="utf-8"))
    assert trace["task"] == task
    text = json.dumps(trace)
    assert env_key not in text and file_key not in text and text.count("[REDACTED]") >= 2
    assert "basic transaction CRUD" in trace["steps"][0]["observation"]


def test_anthropic_thinking_blocks_go_back_exactly(
    beam_store: Path, anthropic_server: ScriptedAnthropicServer
) -> None:
    thinking = {"type": "thinking", "thinking": "Search first.", "signature": "c2lnbmVk=="}
    anthropic_server.enqueue_message(
        [
            thinking,
            {"type": "text", "text": "Looking.\n⟦ find sprint | none | search | in_progress ⟧"},
            {"type": "tool_use", "id": "toolu_1", "name": "recall_history_python",
             "input": {"source": "print(len(ms.search('sprint', k=2)))"}},
        ],
        stop_reason="tool_use",
    )  # fmt: skip
    anthropic_server.enqueue_message(
        [{"type": "tool_use", "id": "toolu_2", "name": "submit_answer",
          "input": {"answer": "two hits"}}],
        stop_reason="tool_use",
    )  # fmt: skip

    with Agent(
        model="anthropic:claude-scripted", store=beam_store, environ=anthropic_server.environ
    ) as agent:
        finished = agent.ask("Sprints?", task_id=TASK)

    assert (finished.status, finished.answer) == ("answered", "two hits")
    second = anthropic_server.requests[1].body["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["content"][0] == thinking
    result = next(
        block
        for m in second
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    )
    assert result["tool_use_id"] == "toolu_1"
    assert observed(result["content"]) == "stdout:\n2"
    assert finished.trace_path is not None
    trace = json.loads(finished.trace_path.read_text(encoding="utf-8"))
    assert trace["steps"][0]["reasoning"] == "Search first."


def test_a_later_probe_searching_its_task_does_not_find_an_earlier_probe(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls(
        [("submit_answer", {"answer": "zebrafinch"})],
        text="The zebrafinch answer.\n⟦ zebrafinch | zebrafinch | none | done ⟧",
    )
    counts = "[len(ms.search(q, scope=s)) for q, s in [('zebrafinch', 'task'), ('zebrafinch', "
    counts += "'all'), ('sprint', 'task')]]"
    openai_server.enqueue_tool_calls([_recall(f"print({counts})")])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "none"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        agent.ask("First probe?", task_id=TASK)
        agent.ask("Second probe?", task_id=TASK)

    (observation,) = tool_messages(openai_server.requests[2].body)
    in_task, in_store, sprints = json.loads(observation.removeprefix("stdout:\n"))
    # A probe's turns are not evidence: they stay out of search in the task and in the store.
    assert (in_task, in_store) == (0, 0)
    assert sprints > 0


def test_a_streaming_agent_yields_the_text_as_it_arrives_and_logs_it_whole(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("Six times seven is forty-two, and that is final.")
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "42"})])

    with Agent(model=scripted_backend, store=beam_store, stream=True) as agent:
        events = list(agent.iter_run("Compute six times seven."))

    deltas = [e for e in events if isinstance(e, TextDelta)]
    first_step = next(e for e in events if isinstance(e, ModelStep))
    assert len(deltas) > 1 and all(d.step_index == 0 for d in deltas)
    assert events.index(deltas[-1]) < events.index(first_step)
    assert "".join(d.text for d in deltas) == first_step.text
    assert all(r.body["stream"] is True for r in openai_server.requests)
    [turn] = _rows(beam_store, "SELECT content FROM conversation_history WHERE seq = ?",
                   (first_step.seq,))  # fmt: skip
    assert turn["content"] == "Six times seven is forty-two, and that is final."
    assert isinstance(events[-1], RunFinished) and events[-1].answer == "42"


def test_the_first_answer_a_cell_submits_is_the_answer(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    cell = "print(submit_answer('first'))\nprint(submit_answer('second'))"
    openai_server.enqueue_tool_calls([("repl_exec", {"source": cell})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Answer twice.")

    assert (finished.status, finished.answer) == ("answered", "first")
