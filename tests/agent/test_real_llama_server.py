"""The agent against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's
``python -m llama_cpp.server`` serving Gemma 3 270M (``llama_server.py``), in a plain chat
format (``gemma``) and a function-calling one (``chatml-function-calling``).

The model is a 270M base model: nothing here asserts what it answers. What is asserted is what
issue 10 found broken against this server: every request is accepted (an assistant turn with
tool calls used to go back with ``content: null``, which this server answers with HTTP 500),
every reply is parsed, each run ends with an answer or an explicit failure record, and its
trace is written. Replies are capped (``--max-tokens``) so the whole file stays short.

A third alias renders a chat template as strict as Gemma's or Mistral's published ones (user and
assistant strictly alternating, ``llama_server.STRICT``): issue 14 found the view sending two user
messages in a row (the index, then the question; an observation, then the namespace digest),
which such a template refuses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_server import PLAIN, STRICT, TOOLS, LlamaServer

from scrollctx.agent import (
    Agent,
    ChatRequest,
    Completion,
    Delta,
    RetryPolicy,
    RunFinished,
    ScrollPolicy,
    ToolSpec,
)
from scrollctx.agent.backends._openai import OpenAIBackend
from scrollctx.errors import BackendError
from scrollctx.log import EventLog
from scrollctx.view import DIGEST_HEADER, carried_index

pytestmark = pytest.mark.slow

SCROLL = Path(sys.executable).parent / "scroll"
TASK = "beam/100K/1"
REPL = ToolSpec(
    "repl_exec",
    "Run a Python cell.",
    {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
)
# What the loop sends back after a tool call: the assistant turn as the log keeps it (content
# None beside the calls) and the call's result.
AFTER_A_TOOL_CALL: list[Any] = [
    {"role": "user", "content": "Print one."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "repl_exec", "arguments": '{"source": "print(1)"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "name": "repl_exec", "content": "stdout:\n1"},
]
# Outcomes a run may end with here: an answer, or the loop's own explicit give-up. A provider
# error (a rejected request, an unparsable reply) is exactly what these tests exist to catch.
ACCEPTABLE_ENDS = {("answered", None), ("failed", "step_limit"), ("replied", None)}


def _end(finished: RunFinished | dict[str, Any]) -> tuple[str, str | None]:
    if isinstance(finished, dict):
        return finished["status"], finished["failure_type"]
    return finished.status, finished.failure_type


def _scroll(args: list[str], server: LlamaServer, store: Path, stdin: str = "") -> Any:
    env = {**os.environ, "SCROLL_STORE": str(store), "OPENAI_API_KEY": "unused"}
    return subprocess.run(
        [str(SCROLL), *args, "--base-url", server.base_url],
        input=stdin, capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip


def _model_turns(store: Path) -> list[dict[str, Any]]:
    import sqlite3

    conn = sqlite3.connect(store / "history.db")
    try:
        rows = conn.execute(
            "SELECT metadata FROM conversation_history WHERE kind = 'model_turn' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return [json.loads(row[0])["model_call"] for row in rows]


# -- the plain chat format ----------------------------------------------------------------


def test_a_conversation_after_a_tool_call_is_accepted(llama_server: LlamaServer) -> None:
    with OpenAIBackend(model=PLAIN, base_url=llama_server.base_url, api_key="unused") as backend:
        answer = backend.complete(
            ChatRequest(messages=AFTER_A_TOOL_CALL, tools=[REPL], options={"max_tokens": 8})
        )
        pieces = list(
            backend.stream(
                ChatRequest(messages=AFTER_A_TOOL_CALL, tools=[REPL], options={"max_tokens": 8})
            )
        )

    assert isinstance(answer.text, str) and answer.finish_reason in {"stop", "length"}
    assert answer.usage is not None and 0 < answer.usage.completion_tokens <= 8
    assert isinstance(pieces[-1], Completion)
    assert all(isinstance(piece, Delta) for piece in pieces[:-1])
    assert pieces[-1].text == "".join(p.text for p in pieces[:-1] if isinstance(p, Delta))


@pytest.mark.parametrize("alias", [PLAIN, STRICT])  # STRICT: the index and question in one
def test_scroll_ask_ends_with_an_answer_or_a_failure_record(
    llama_server: LlamaServer, beam_store: Path, alias: str
) -> None:
    done = _scroll(
        ["ask", "--model", f"openai:{alias}", "--max-tokens", "24", "--max-steps", "2",
         "--task", TASK, "--json", "When does my first sprint end?"],
        llama_server, beam_store,
    )  # fmt: skip

    assert done.returncode in (0, 1), done.stderr + llama_server.log_tail()
    result = json.loads(done.stdout)
    assert _end(result) in ACCEPTABLE_ENDS, (result, llama_server.log_tail())
    trace = json.loads(Path(result["trace_path"]).read_text(encoding="utf-8"))
    assert trace["model"] == f"openai:{alias}" and trace["steps"]
    turns = _model_turns(beam_store)
    assert len(turns) == result["metrics"]["step_count"] >= 1
    assert all(turn["usage"]["completion_tokens"] <= 24 for turn in turns)


def test_scroll_chat_streams_a_reply_and_keeps_the_session(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    done = _scroll(
        ["chat", "--model", f"openai:{PLAIN}", "--max-tokens", "16", "--max-steps", "2"],
        llama_server, store, stdin="Hello, who are you?\n/exit\n",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr + llama_server.log_tail()
    assert "new chat session chat-" in done.stderr
    assert "rejected" not in done.stderr and "unavailable" not in done.stderr
    assert len(_model_turns(store)) >= 1


def test_a_one_question_bench_run_scores_its_record(
    llama_server: LlamaServer, shared_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "locomo.jsonl"
    done = _scroll(
        ["bench", "run", "--benchmark", "locomo", "--categories", "4", "--limit", "1",
         "--system", "scroll", "--model", f"openai:{PLAIN}", "--max-tokens", "16",
         "--max-steps", "1", "--data", str(shared_data), "--out", str(out), "--json"],
        llama_server, tmp_path / "unused-store",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr + llama_server.log_tail()
    [record] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert record["status"] == "scored" and record["model"] == f"openai:{PLAIN}"
    assert (record["run_status"], record["failure_type"]) in ACCEPTABLE_ENDS
    assert Path(record["trace"]).is_file()


# -- the function-calling format: real tool calls ------------------------------------------


def test_the_loop_runs_native_tool_calls_step_after_step(
    llama_server: LlamaServer, beam_store: Path
) -> None:
    # Forcing repl_exec makes every step a tool call, so step 2's request carries step 1's
    # assistant turn with its tool call: the request this server used to reject.
    forced = {"type": "function", "function": {"name": "repl_exec"}}
    with Agent(
        model=f"openai:{TOOLS}",
        store=beam_store,
        environ={**llama_server.environ, "OPENAI_API_KEY": "unused"},
        max_steps=2,
        options={"max_tokens": 48, "tool_choice": forced},
    ) as agent:
        finished = agent.ask("When does my first sprint end?", task_id=TASK)

    assert _end(finished) in ACCEPTABLE_ENDS, (finished.failure, llama_server.log_tail())
    turns = _model_turns(beam_store)
    assert len(turns) == finished.metrics.step_count == 2
    assert all(turn["finish_reason"] == "tool_calls" for turn in turns)
    assert finished.trace_path is not None and finished.trace_path.is_file()


# -- a strict chat template: roles must alternate ------------------------------------------


def _strict_reply(server: LlamaServer, system: str, messages: list[Any]) -> Completion:
    once = RetryPolicy(max_attempts=1)  # a refusal is the answer here, not a reason to retry
    with OpenAIBackend(
        model=STRICT, base_url=server.base_url, api_key="unused", retry=once
    ) as backend:
        # A long timeout: the carried index is a few thousand tokens to read on a loaded CPU.
        options = {"max_tokens": 4, "timeout": 600}
        return backend.complete(ChatRequest(messages, system, [], options))


def _roles(messages: list[Any]) -> list[str]:
    return [str(message["role"]) for message in messages]


def test_the_strict_template_refuses_two_user_messages_in_a_row(
    llama_server: LlamaServer,
) -> None:
    # The control: without it, the acceptances below would prove nothing about strictness.
    alternating = [{"role": "user", "content": "Hi."}]
    assert isinstance(_strict_reply(llama_server, "Be brief.", alternating), Completion)
    with pytest.raises(BackendError):
        _strict_reply(llama_server, "Be brief.", [*alternating, {"role": "user", "content": "?"}])


def test_the_views_request_after_an_observation_passes_a_strict_template(
    llama_server: LlamaServer, beam_store: Path
) -> None:
    # The probe's view exactly as the plain (no tool-call) path builds it: the carried index,
    # the question, a reply with fenced code, its observation, then the namespace digest.
    with EventLog.open(beam_store / "history.db") as log:
        given = carried_index(log, TASK)
        assert given is not None, "the store's import wrote no carried index"
        policy = ScrollPolicy.open(
            log, "probe", "Answer from the history.", budget_tokens=4000, initial_index=given
        )
        policy.add({"role": "user", "content": "When does my first sprint end?"})
        policy.add({"role": "assistant", "content": "```python\nprint(1)\n```"})
        policy.add({"role": "user", "content": "Observation (repl_exec):\nstdout:\n1"})
        digest = DIGEST_HEADER + "x: int = 1"
        prepared = policy.prepare(digest)
        unmerged = [message for _, message, _ in policy.parts()]

    # What the layout joins: the index opens the question, the digest closes the observation.
    assert _roles(unmerged) == ["user", "user", "assistant", "user", "user"]
    assert _roles(prepared.messages) == ["user", "assistant", "user"]
    with pytest.raises(BackendError):
        _strict_reply(llama_server, prepared.system, unmerged)
    reply = _strict_reply(llama_server, prepared.system, prepared.messages)
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
