"""``AgentLoop`` driven directly (``run`` drains ``iter_run``), and the edges of any run: an
empty task is refused, ids have their documented shape, ``run_end`` holds the answer's start."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import (
    Agent,
    AgentLoop,
    Backend,
    Limits,
    ModelStep,
    PromptSet,
    RunFinished,
    ScrollPolicy,
    TextDelta,
    ToolStep,
)
from scrollctx.agent._loop import PROMPT_KEY
from scrollctx.agent._tools import ToolContext, scroll_toolset
from scrollctx.errors import UsageError
from scrollctx.log import EventLog
from scrollctx.surface import open_surface
from scrollctx.view import WorkingView


def _loop(log: EventLog, backend: Backend, **settings: Any) -> AgentLoop:
    toolset = scroll_toolset([])
    context = ToolContext(log, session_id="s1", kernel_functions=toolset.kernel_functions)
    policy = ScrollPolicy.open(log, "s1", "system", budget_tokens=8000)
    return AgentLoop(backend=backend, policy=policy, toolset=toolset, context=context, **settings)


def test_run_returns_the_run_finished_that_iter_run_ends_with(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "first"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "second"})])
    loop = _loop(event_log, scripted_backend)
    try:
        finished = loop.run(task="Answer.", run_id="run-given")
        events = list(loop.iter_run(task="Answer again."))
    finally:
        loop.context.close()
    assert (finished.run_id, finished.status, finished.answer) == ("run-given", "answered", "first")
    last = events[-1]
    assert isinstance(last, RunFinished) and last.answer == "second"
    assert re.fullmatch(r"run-[0-9a-f]{12}", last.run_id)  # new_id's documented shape


@pytest.mark.parametrize("task", ["", "  \n\t "])
def test_an_empty_task_is_refused_before_any_model_call(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer, task: str
) -> None:
    with Agent(model=scripted_backend, store=beam_store) as agent:
        with pytest.raises(UsageError, match="the task is empty"):
            agent.run(task)
    assert openai_server.requests == []


def test_run_end_holds_the_first_500_characters_of_a_long_answer(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    answer = " ".join(f"{n:04d}" for n in range(200))  # 999 characters, each place distinct
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": answer})])
    loop = _loop(event_log, scripted_backend)
    try:
        finished = loop.run("Answer at length.")
    finally:
        loop.context.close()
    assert finished.answer == answer
    run_end = event_log.get(finished.seq)
    assert run_end.content == f"run {finished.run_id} answered: {answer[:500]}"


def test_without_limits_a_run_stops_after_30_steps_and_one_step_is_a_limit_too(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    for _ in range(30):
        openai_server.enqueue_text("Still thinking.")  # no action: nudged, never done
    loop = _loop(event_log, scripted_backend)
    try:
        finished = loop.run("Think.")
    finally:
        loop.context.close()
    assert finished.failure == "step limit reached: 30 steps without submit_answer"
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "at once"})])
    loop = _loop(event_log, scripted_backend, limits=Limits(max_steps=1))
    try:
        assert loop.run("Answer at once.").answer == "at once"
    finally:
        loop.context.close()


def test_each_tool_step_carries_the_call_arguments_or_the_raw_text_that_did_not_parse(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "x = 1"})])
    openai_server.enqueue_tool_calls([("repl_exec", '{"source": ')])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])
    loop = _loop(event_log, scripted_backend)
    try:
        steps = [e for e in loop.iter_run("Run cells.") if isinstance(e, ToolStep)]
    finally:
        loop.context.close()
    assert [s.args for s in steps] == [
        {"source": "x = 1"},
        {"raw": '{"source": '},
        {"answer": "done"},
    ]
    # Each result's event says whether its call worked: the unparsable one did not.
    assert [event_log.get(s.seq).tool_state for s in steps[:2]] == ["ok", "error"]


def test_a_run_logs_its_system_prompt_once_however_many_calls_it_makes(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "x = 1"})])
    openai_server.enqueue_tool_calls([("repl_exec", {"source": "x += 1"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "2"})])
    loop = _loop(event_log, scripted_backend)
    try:
        finished = loop.run("Count.")
    finally:
        loop.context.close()
    assert finished.metrics.step_count == 3
    prompts = [e for e in event_log.session_events("s1") if PROMPT_KEY in e.metadata]
    assert [e.content for e in prompts] == ["system"]


def test_the_observation_of_fenced_code_never_becomes_the_active_request(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("```python\nprint(6 * 7)\n```")
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "42"})])
    loop = _loop(event_log, scripted_backend)
    try:
        assert loop.run("Compute six times seven.").answer == "42"
    finally:
        loop.context.close()
    turns = WorkingView.restore(event_log, "s1", "system", budget_tokens=8000).turns
    observation = next(t for t in turns if t.text.startswith("Observation (repl_exec)"))
    assert observation.role == "user" and not observation.is_real_user
    assert [t.text for t in turns if t.is_real_user] == ["Compute six times seven."]


def test_backend_options_and_a_replaced_nudge_reach_the_model(
    event_log: EventLog,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
    tmp_path: Path,
) -> None:
    (tmp_path / "nudge.md").write_text("Act now: run code or submit_answer.", encoding="utf-8")
    openai_server.enqueue_text("Hmm.")
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])
    loop = _loop(
        event_log,
        scripted_backend,
        options={"temperature": 0.25},
        prompts=PromptSet.load(tmp_path),
    )
    try:
        assert loop.run("Answer.").answer == "ok"
    finally:
        loop.context.close()
    first, second = (request.body for request in openai_server.requests)
    assert first["temperature"] == second["temperature"] == 0.25
    assert second["messages"][-1] == {
        "role": "user",
        "content": "Act now: run code or submit_answer.",
    }


def test_in_a_chat_fenced_code_in_a_reply_is_the_reply_not_a_cell(
    event_log: EventLog,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
    tmp_path: Path,
) -> None:
    # The backend calls tools natively, so in a chat a reply's code block is shown, never run.
    marker = tmp_path / "ran.txt"
    reply = f"Like this:\n```python\nopen({str(marker)!r}, 'w').write('ran')\n```"
    openai_server.enqueue_text(reply)
    loop = _loop(event_log, scripted_backend, text_is_reply=True)
    try:
        finished = loop.run("How do I write a file?")
    finally:
        loop.context.close()
    assert (finished.status, finished.answer) == ("replied", reply)
    assert not marker.exists() and len(openai_server.requests) == 1


def test_what_one_step_records_by_default(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    # Defaults of a loop built directly: not streamed, tools offered, the task at step 0, the
    # call's usage and duration in its metadata, every turn searchable, the loop's own notes not.
    openai_server.enqueue_tool_calls(  # usage: 10 in, 5 out
        [("submit_answer", {"answer": "kestrel"})], text="The kestrel, I recall."
    )
    loop = _loop(event_log, scripted_backend)
    started = time.monotonic()
    try:
        events = list(loop.iter_run("Which bird nests on the tower?"))
    finally:
        loop.context.close()
    took = time.monotonic() - started
    assert not any(isinstance(e, TextDelta) for e in events)
    assert openai_server.requests[0].body.get("stream") is not True
    offered = [spec["function"]["name"] for spec in openai_server.requests[0].body["tools"]]
    assert "submit_answer" in offered
    task = next(e for e in event_log.session_events("s1") if e.kind == "user_message")
    assert (task.content, task.step_index) == ("Which bird nests on the tower?", 0)
    step = next(e for e in events if isinstance(e, ModelStep))
    call = event_log.get(step.seq).metadata["model_call"]
    assert call["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert 0 <= step.elapsed_s <= took and 0 <= call["elapsed_s"] <= took
    finished = events[-1]
    assert isinstance(finished, RunFinished) and 0 < finished.metrics.wall_time_s <= took
    with open_surface(event_log.path) as ms:
        assert [hit["seq"] for hit in ms.search("bird nests tower")] == [task.seq]
        run_hex = finished.run_id.removeprefix("run-")  # in run_end's text, nowhere else
        assert ms.search(run_hex) == []  # run_end is a note of the loop, not history


def test_a_streamed_step_yields_its_text_as_it_arrives(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("The kestrel nests on the tower.")
    loop = _loop(event_log, scripted_backend, stream=True, text_is_reply=True)
    try:
        events = list(loop.iter_run("Which bird?"))
    finally:
        loop.context.close()
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert pieces and "".join(pieces) == "The kestrel nests on the tower."
    assert openai_server.requests[0].body["stream"] is True


def test_steps_that_did_nothing_are_not_ok_and_a_nudge_is_no_request(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("Hmm.")  # no action: nudged
    openai_server.enqueue_tool_calls(
        [("submit_answer", {"answer": "ok"}), ("repl_exec", {"source": "x = 1"})]
    )
    loop = _loop(event_log, scripted_backend)
    try:
        steps = [e for e in loop.iter_run("Answer.") if isinstance(e, ToolStep)]
    finally:
        loop.context.close()
    assert [(s.tool, s.ok) for s in steps] == [
        ("", False),
        ("submit_answer", True),
        ("repl_exec", False),
    ]
    assert steps[2].observation == "not run: the answer was already submitted"
    turns = WorkingView.restore(event_log, "s1", "system", budget_tokens=8000).turns
    assert [t.text for t in turns if t.is_real_user] == ["Answer."]


def test_limits_of_one_are_limits_and_zero_is_refused() -> None:
    assert Limits(max_steps=1, max_run_tokens=1) == Limits(1, 1)
    with pytest.raises(UsageError, match="max_steps must be at least 1, got 0"):
        Limits(max_steps=0)
    with pytest.raises(UsageError, match="max_run_tokens must be positive, got 0"):
        Limits(max_run_tokens=0)


def test_the_loop_tags_its_own_notes_with_the_task_by_default(
    event_log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])
    toolset = scroll_toolset([])
    context = ToolContext(
        event_log, session_id="s1", task_id="t1", kernel_functions=toolset.kernel_functions
    )
    policy = ScrollPolicy.open(event_log, "s1", "system", budget_tokens=8000)
    loop = AgentLoop(backend=scripted_backend, policy=policy, toolset=toolset, context=context)
    try:
        finished = loop.run("Answer.")
    finally:
        context.close()
    assert event_log.get(finished.seq).task_id == "t1"  # run_end, a system note of the loop
