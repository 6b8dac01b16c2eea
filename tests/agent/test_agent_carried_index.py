"""The paper's protocol outside the bench: ``scroll ingest`` then ``scroll ask`` (and
``Agent.ask``) open the question's session from the conversation's carried index, recorded
over real HTTP by the scripted server (a test double)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import Agent, Backend
from scrollctx.cli import run
from scrollctx.log import EventLog
from scrollctx.view import INDEX_HEADER, carried_index

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"
LME = FIXTURES / "longmemeval_mini.json"


def _index_message(request_body: dict[str, object]) -> str:
    messages = request_body["messages"]
    assert isinstance(messages, list)
    return str(messages[1]["content"])  # after the system prompt; the question follows in it


def test_scroll_ingest_then_scroll_ask_sends_the_carried_index(
    openai_server: ScriptedOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in openai_server.environ.items():
        monkeypatch.setenv(name, value)
    store = tmp_path / "store"
    assert run(["ingest", "--store", str(store), str(LME)]) == 0
    capsys.readouterr()
    with EventLog.open(store / "history.db") as log:
        task = "longmemeval/7a1c2e90"
        stored = carried_index(log, task)
        assert stored is not None and stored["counters"]["evictions"] == 3  # one block a session
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "12 days"})])
    question = "How many days between the pottery class and adopting Biscuit?"
    code = run(
        ["ask", "--store", str(store), "--model", "openai:m", "--task", task, "--json", question]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["answer"] == "12 days"
    (request,) = openai_server.requests
    index = _index_message(request.body)
    assert index.startswith(INDEX_HEADER.split(".")[0])
    for number in (1, 2, 3):
        assert f"[Session {number} | 2023-" in index
    assert question in index.split("\n\n")[-1]  # one user message: the index, then the task


def test_agent_ask_without_a_task_uses_the_stores_only_conversation(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "March 29"})])
    with Agent(model=scripted_backend, store=beam_store) as agent:
        agent.ask("When does my first sprint end?")
    index = _index_message(openai_server.requests[0].body)
    assert index.startswith("[eviction index]") and "[Session 1 | " in index


def test_run_and_chat_do_not_get_a_carried_index(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])
    with Agent(model=scripted_backend, store=beam_store) as agent:
        agent.run("Count to three.")
    messages = openai_server.requests[0].body["messages"]
    assert all("[eviction index]" not in str(m["content"]) for m in messages)
