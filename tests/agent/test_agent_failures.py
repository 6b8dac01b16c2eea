"""How runs end when things go wrong: provider errors and retries, too-long contexts, step and
token limits, a model that does not act. Every failure is an explicit record: a ``run_end``
event, a ``RunFinished`` with ``failure`` and a trace with ``status: failed``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer, SleepRecorder

from scrollctx.agent import (
    Agent,
    Backend,
    ContextEvicted,
    ContextPolicy,
    PolicyRequest,
    RunFinished,
    ScrollPolicy,
    read_prompt,
    tool,
)
from scrollctx.errors import UsageError
from scrollctx.log import EventLog
from scrollctx.view import WorkingView


def _run_end(store: Path, finished: RunFinished) -> dict[str, Any]:
    conn = sqlite3.connect(store / "history.db")
    try:
        (metadata,) = conn.execute(
            "SELECT metadata FROM conversation_history WHERE seq = ?", (finished.seq,)
        ).fetchone()
    finally:
        conn.close()
    end: dict[str, Any] = json.loads(metadata)["run_end"]
    return end


def _assert_failure_record(
    store: Path, finished: RunFinished, words: str, failure_type: str
) -> None:
    assert finished.status == "failed" and finished.answer is None
    assert finished.failure is not None and words in finished.failure
    assert finished.failure_type == failure_type  # structured: callers never parse the text
    end = _run_end(store, finished)
    assert (end["status"], end["failure"]) == ("failed", finished.failure)
    assert end["failure_type"] == failure_type
    assert finished.trace_path is not None
    trace = json.loads(finished.trace_path.read_text(encoding="utf-8"))
    assert (trace["status"], trace["failure"]) == ("failed", finished.failure)
    assert trace["failure_type"] == failure_type


def _print_cell(words: int, tag: str) -> tuple[str, dict[str, str]]:
    return ("repl_exec", {"source": f"print(' '.join(['{tag}'] * {words}))"})


def test_rate_limits_and_outages_are_retried_inside_a_step(
    beam_store: Path,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
    sleeps: SleepRecorder,
) -> None:
    openai_server.enqueue_error(429, headers={"Retry-After": "2"})
    openai_server.enqueue_error(503)
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Answer ok.")

    assert (finished.status, finished.answer) == ("answered", "ok")
    assert len(sleeps.waits) == 2 and sleeps.waits[0] == 2.0
    assert finished.metrics.step_count == 1


def test_a_provider_that_stays_down_ends_the_run_with_a_failure_record(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    for _ in range(4):
        openai_server.enqueue_error(503)

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Answer ok.")

    _assert_failure_record(beam_store, finished, "gave up", "BackendUnavailable")
    assert "gave up after 4 attempts" in (finished.failure or "")


def test_the_step_limit_ends_the_run_with_a_failure_record(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([_print_cell(3, "a")])
    openai_server.enqueue_tool_calls([_print_cell(3, "b")])

    with Agent(model=scripted_backend, store=beam_store, max_steps=2) as agent:
        finished = agent.run("Loop forever.")

    _assert_failure_record(beam_store, finished, "step limit reached: 2 steps", "step_limit")
    assert finished.metrics.step_count == 2


def test_the_token_budget_ends_the_run_with_a_failure_record(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([_print_cell(3, "a")])  # usage 10 in + 5 out per call
    openai_server.enqueue_tool_calls([_print_cell(3, "b")])

    # Exactly at the budget after two calls (15 + 15 = 30): the run stops there, it does not
    # make a third call.
    with Agent(model=scripted_backend, store=beam_store, max_run_tokens=30) as agent:
        finished = agent.run("Spend tokens.")

    _assert_failure_record(beam_store, finished, "token budget exhausted: 30 of 30", "token_budget")
    assert len(openai_server.requests) == 2


def test_a_reply_without_an_action_gets_a_nudge(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("I think the answer is ok.")
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Answer ok.")

    assert finished.answer == "ok"
    last = openai_server.requests[1].body["messages"][-1]
    assert last == {"role": "user", "content": read_prompt("nudge")}


def _lean_policy(request: PolicyRequest) -> ContextPolicy:
    view = WorkingView(
        request.log, request.session_id, request.system_prompt,
        budget_tokens=request.budget_tokens, tail_groups=1, keep_results=1,
        event_fields=request.event_fields,
    )  # fmt: skip
    return ScrollPolicy(view)


def test_a_too_long_context_is_evicted_harder_and_retried_once(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    for number in range(6):
        openai_server.enqueue_tool_calls([_print_cell(300, f"w{number}")])
    openai_server.enqueue_error(400, code="context_length_exceeded", message="too long")
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "fits now"})])

    with Agent(
        model=scripted_backend, store=beam_store, budget_tokens=20_000, policy=_lean_policy
    ) as agent:
        events = list(agent.iter_run("Print a lot."))

    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.answer == "fits now"
    rejected, retried = (r.body for r in openai_server.requests[6:8])
    assert len(json.dumps(retried)) < 0.8 * len(json.dumps(rejected))
    oldest = " ".join(["w0"] * 300)
    assert oldest in json.dumps(rejected) and oldest not in json.dumps(retried)
    evicted = [e for e in events if isinstance(e, ContextEvicted)]
    assert len(evicted) == 1 and evicted[0].tokens_after < evicted[0].tokens_before
    conn = sqlite3.connect(beam_store / "history.db")
    try:
        logged = conn.execute(
            "SELECT count(*) FROM conversation_history WHERE session_id = ? AND kind = 'system' "
            "AND json_extract(metadata, '$.context_too_long') IS NOT NULL",
            (finished.session_id,),
        ).fetchone()[0]
    finally:
        conn.close()
    assert logged == 1


def test_a_second_too_long_rejection_ends_the_run(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    for number in range(3):
        openai_server.enqueue_tool_calls([_print_cell(300, f"w{number}")])
    openai_server.enqueue_error(400, code="context_length_exceeded", message="too long")
    openai_server.enqueue_error(400, code="context_length_exceeded", message="still too long")

    with Agent(
        model=scripted_backend, store=beam_store, budget_tokens=20_000, policy=_lean_policy
    ) as agent:
        finished = agent.run("Print a lot.")

    _assert_failure_record(beam_store, finished, "too long", "ContextTooLong")
    assert len(openai_server.requests) == 5


def test_a_kernel_tool_with_a_reserved_name_is_refused_when_registered() -> None:
    def ms(query: str) -> str:
        return query

    with pytest.raises(UsageError, match="'ms' is reserved by the kernel"):
        tool(ms)
    assert tool(ms, expose="model").name == "ms"  # only the kernel reserves the name


def test_a_session_cut_between_a_call_and_its_result_continues(event_log: EventLog) -> None:
    policy = ScrollPolicy.open(event_log, "s1", "system", budget_tokens=8000)
    policy.add({"role": "user", "content": "Run something."})
    call = {"id": "call_9", "type": "function",
            "function": {"name": "repl_exec", "arguments": '{"source": "1"}'}}  # fmt: skip
    policy.add({"role": "assistant", "content": None, "tool_calls": [call]})
    # The process dies here; a new one restores the session from the log.
    restored = ScrollPolicy.open(event_log, "s1", "system", budget_tokens=8000)

    restored.add({"role": "user", "content": "Are you there?"})

    messages = restored.prepare("").messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[2]["tool_call_id"] == "call_9"
    assert "interrupted" in (messages[2]["content"] or "")
    again = ScrollPolicy.open(event_log, "s1", "system", budget_tokens=8000).prepare("")
    assert again.messages == messages


def test_ctrl_c_still_leaves_a_failure_record(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    @tool(expose="model")
    def slow_lookup(key: str) -> str:
        """Look a key up slowly."""
        raise KeyboardInterrupt

    openai_server.enqueue_tool_calls([("slow_lookup", {"key": "k"})])
    with Agent(model=scripted_backend, store=beam_store, tools=[slow_lookup]) as agent:
        with pytest.raises(KeyboardInterrupt):
            agent.run("Look k up.")

    conn = sqlite3.connect(beam_store / "history.db")
    try:
        (metadata,) = conn.execute(
            "SELECT metadata FROM conversation_history WHERE kind = 'system' "
            "AND json_extract(metadata, '$.run_end') IS NOT NULL"
        ).fetchone()
    finally:
        conn.close()
    end = json.loads(metadata)["run_end"]
    assert (end["status"], end["failure"]) == ("failed", "interrupted by the user")
    assert end["failure_type"] == "interrupted"
    assert Path(end["trace_path"]).is_file()
