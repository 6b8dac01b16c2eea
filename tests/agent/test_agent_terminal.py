"""The model commands on a real terminal (a pseudo-terminal), as a person sees them: a live line
with the step and the time while the model thinks, the reply streaming in ``scroll chat``, a
chat that says whether it is new or continued, and Ctrl-C that says how to continue.

The scripted server holds its reply until the test has seen what the terminal shows meanwhile:
the tests synchronise on the program's output, never on sleeps.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.log import EventLog
from terminal import start

SCROLL = Path(sys.executable).parent / "scroll"


def _env(server: ScriptedOpenAIServer, store: Path) -> dict[str, str]:
    return {**os.environ, **server.environ, "SCROLL_STORE": str(store)}


def test_ask_shows_the_step_and_a_moving_clock_while_the_model_thinks(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    release = threading.Event()

    def held(_request: RecordedRequest) -> ScriptedReply:
        release.wait(timeout=60)
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": "Friday"})])

    openai_server.enqueue(held)
    term = start(
        [str(SCROLL), "ask", "--model", "openai:m", "When?"], _env(openai_server, beam_store)
    )
    try:
        term.wait_for(r"step 0 · waiting for the model · \d+\.\d s \(total \d+\.\d s\)")
        term.wait_for(r"waiting for the model · [1-9]\d*\.\d s")  # the clock moves meanwhile
    finally:
        release.set()

    assert term.finish() == 0
    assert "Friday" in term.screen and "answered: 1 steps" in term.screen


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_run_terminated_by_a_signal_records_its_end(
    beam_store: Path, openai_server: ScriptedOpenAIServer, sent: signal.Signals
) -> None:
    # `timeout`, `docker stop` or a closed ssh session ended the run with no run_end at all.
    release = threading.Event()

    def held(_request: RecordedRequest) -> ScriptedReply:
        release.wait(timeout=60)
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": "late"})])

    openai_server.enqueue(held)
    term = start(
        [str(SCROLL), "ask", "--model", "openai:m", "When?"], _env(openai_server, beam_store)
    )
    try:
        term.wait_for("step 0 · waiting for the model")
        term.process.send_signal(sent)
        assert term.finish() == 130
    finally:
        release.set()
    term.wait_for(f"terminated by {sent.name}: the run is recorded as failed \\(interrupted\\)")
    with EventLog.open(beam_store / "history.db") as log:
        ends = [
            e.metadata["run_end"] for e in log.events_after(0, 10_000) if "run_end" in e.metadata
        ]
    assert [(end["failure"], end["failure_type"]) for end in ends] == [
        (f"terminated by {sent.name}", "interrupted")
    ]


def test_chat_streams_the_reply_and_shows_it_once(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    release = threading.Event()
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}}]}
        for piece in ("Hello", " there,", " streaming", " world.")
    ]
    events: list[tuple[str | None, object]] = [(None, chunk) for chunk in chunks]
    openai_server.enqueue(ScriptedReply(sse=[*events, (None, "[DONE]")], hold=(2, release)))
    term = start([str(SCROLL), "chat", "--model", "openai:m"], _env(openai_server, beam_store))
    try:
        term.wait_for(r"new chat session chat-\w+")
        term.wait_for("you> ")
        term.type("hi\n")
        term.wait_for("Hello there,")  # shown while the rest of the answer is still held
        assert "streaming world." not in term.screen
    finally:
        release.set()
    term.wait_for("Hello there, streaming world.\n")
    term.type("/exit\n")

    assert term.finish() == 0
    assert openai_server.requests[0].body["stream"] is True
    assert term.screen.count("Hello there, streaming world.") == 1  # the preview was transient
    assert "trace:" not in term.screen and "step 0:" not in term.screen


def test_ctrl_c_in_chat_says_how_to_continue(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_text("Noted.")
    env = _env(openai_server, beam_store)
    first = start([str(SCROLL), "chat", "--model", "openai:m"], env)
    first.wait_for("you> ")
    first.type("remember 42\n")
    first.wait_for("Noted.")
    first.wait_for("you> ")
    os.killpg(first.process.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's group

    assert first.finish() == 130
    session = first.wait_for(r"chat session (chat-\w+) is saved; continue it with: "
                             r"scroll chat --session (chat-\w+)")  # fmt: skip
    assert session.group(1) == session.group(2)

    second = start([str(SCROLL), "chat", "--model", "openai:m"], env)
    second.wait_for(rf"continuing chat session {session.group(1)} \(1 earlier message\)")
    second.wait_for("you> ")
    second.type("/exit\n")
    assert second.finish() == 0
