"""``submit_answer`` ends the run: calls after it in the same response are not run."""

from __future__ import annotations

import json
from pathlib import Path

from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import Agent, Backend


def test_calls_after_submit_answer_in_one_response_are_not_run(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    marker = beam_store.parent / "ran.txt"
    openai_server.enqueue_tool_calls(
        [
            ("submit_answer", {"answer": "first"}),
            ("repl_exec", {"source": f"open({str(marker)!r}, 'w').write('ran')"}),
            ("submit_answer", {"answer": "second"}),
        ]
    )

    with Agent(model=scripted_backend, store=beam_store) as agent:
        finished = agent.run("Answer.")

    assert (finished.status, finished.answer) == ("answered", "first")
    assert len(openai_server.requests) == 1
    assert not marker.exists()
    assert finished.trace_path is not None
    steps = json.loads(finished.trace_path.read_text(encoding="utf-8"))["steps"]
    assert [s["action"]["tool"] for s in steps] == ["submit_answer", "repl_exec", "submit_answer"]
    assert [s["observation"] for s in steps[1:]] == [
        "not run: the answer was already submitted"
    ] * 2
