"""The agent against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's
``python -m llama_cpp.server`` serving Gemma 3 270M (``llama_server.py``), in a plain chat
format (``gemma``) and a function-calling one (``chatml-function-calling``).

The model is a 270M base model: nothing here asserts what it answers. What is asserted is what
issue 10 found broken against this server: every request is accepted (an assistant turn with
tool calls used to go back with ``content: null``, which this server answers with HTTP 500),
every reply is parsed, each run ends with an answer or an explicit failure record, and its
trace is written. Replies are capped (``--max-tokens``) so the whole file stays short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from llama_server import PLAIN, TOOLS, LlamaServer

from scrollctx.agent import Agent, ChatRequest, Completion, Delta, RunFinished, ToolSpec
from scrollctx.agent.backends._openai import OpenAIBackend

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


def test_scroll_ask_ends_with_an_answer_or_a_failure_record(
    llama_server: LlamaServer, beam_store: Path
) -> None:
    done = _scroll(
        ["ask", "--model", f"openai:{PLAIN}", "--max-tokens", "24", "--max-steps", "2",
         "--task", TASK, "--json", "When does my first sprint end?"],
        llama_server, beam_store,
    )  # fmt: skip

    assert done.returncode in (0, 1), done.stderr + llama_server.log_tail()
    result = json.loads(done.stdout)
    assert _end(result) in ACCEPTABLE_ENDS, result
    trace = json.loads(Path(result["trace_path"]).read_text(encoding="utf-8"))
    assert trace["model"] == f"openai:{PLAIN}" and trace["steps"]
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
