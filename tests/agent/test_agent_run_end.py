"""A run's end is recorded whatever ends it: a trace the disk cannot take, a reply holding a lone
surrogate, an error nobody foresaw.

Each of these once ended ``scroll run`` with "unexpected …Error" and no ``run_end`` event: the
trace is written before ``run_end``, and what its writing raised escaped past the handler that
keeps a refused ``run_end`` from ending the run (found by an outside audit).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import AgentEvent, AgentLoop, Backend, RunFinished, ScrollPolicy
from scrollctx.agent._tools import ToolContext, scroll_toolset
from scrollctx.agent._trace import TraceRecorder
from scrollctx.log import EventLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EventLog]:
    with EventLog.open(tmp_path / "store" / "history.db") as opened:
        yield opened


def _loop(log: EventLog, backend: Backend, traces: Path) -> AgentLoop:
    toolset = scroll_toolset([])
    context = ToolContext(log, session_id="s1", kernel_functions=toolset.kernel_functions)
    policy = ScrollPolicy.open(log, "s1", "system", budget_tokens=8000)
    return AgentLoop(
        backend=backend, policy=policy, toolset=toolset, context=context, trace_dir=traces
    )


def _run(loop: AgentLoop, task: str, run_id: str = "run-test") -> list[AgentEvent]:
    try:
        return list(loop.iter_run(task, run_id=run_id))
    finally:
        loop.context.close()


def _run_end(log: EventLog) -> dict[str, Any]:
    [end] = [e.metadata["run_end"] for e in log.session_events("s1") if "run_end" in e.metadata]
    return dict(end)


def test_a_trace_the_disk_cannot_take_is_said_and_run_end_is_still_recorded(
    tmp_path: Path, log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    os.symlink("/dev/full", traces / "run-test.json.tmp")  # every write to it: ENOSPC
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "ok"})])
    finished = _run(_loop(log, scripted_backend, traces), "Answer ok.")[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.answer, finished.trace_path) == ("answered", "ok", None)
    said = f"the trace could not be written to {traces}: No space left on device"
    assert finished.trace_error == said
    assert finished.seq > 0 and _run_end(log)["trace_error"] == said
    assert list(traces.iterdir()) == []  # no half-written trace is left


def test_a_lone_surrogate_in_the_models_reply_is_kept_in_the_trace_as_in_the_log(
    tmp_path: Path, log: EventLog, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    answer = "half an emoji: \ud83d, then more"  # JSON's "\ud83d" from the server
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": answer})])
    finished = _run(_loop(log, scripted_backend, tmp_path / "traces"), "Answer.")[-1]
    assert isinstance(finished, RunFinished) and finished.answer == answer
    assert finished.trace_path is not None and finished.trace_error is None
    trace = json.loads(finished.trace_path.read_bytes())  # valid UTF-8 JSON
    kept = "half an emoji: \\ud83d, then more"  # the six characters of the escape
    assert trace["answer"] == kept == _run_end(log)["answer"]


def test_two_lone_halves_side_by_side_are_not_written_as_the_pair_they_would_make(
    tmp_path: Path,
) -> None:
    # A streamed emoji split across two deltas leaves two lone halves; written as JSON escapes
    # they read back as one emoji, which the Event Log does not hold.
    trace = TraceRecorder("t", "run-pair", "s", "m", "task")
    path = trace.write(tmp_path, {"answer": "A\ud83d\ude00B"})
    assert json.loads(path.read_bytes())["answer"] == "A\\ud83d\\ude00B"


def test_an_error_nobody_foresaw_is_recorded_as_the_runs_end_and_raised(
    tmp_path: Path,
    log: EventLog,
    scripted_backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a backend")

    monkeypatch.setattr(scripted_backend, "complete", broken)
    loop = _loop(log, scripted_backend, tmp_path / "traces")
    with pytest.raises(RuntimeError, match="a bug in a backend"):
        _run(loop, "Answer.")
    end = _run_end(log)
    assert (end["status"], end["failure_type"]) == ("failed", "internal_error")
    assert end["failure"] == "unexpected RuntimeError: a bug in a backend"
    trace = json.loads((tmp_path / "traces" / "run-test.json").read_text(encoding="utf-8"))
    assert trace["failure_type"] == "internal_error"


@pytest.mark.parametrize("after", ["RunStarted", "ModelStep"])
def test_a_caller_that_stops_reading_the_run_leaves_its_end_recorded(
    tmp_path: Path,
    log: EventLog,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
    after: str,
) -> None:
    # Breaking out of iter_run (or a BrokenPipeError while showing an event) closes the
    # generator: the run once ended there with its run_start and no run_end.
    if after == "ModelStep":
        openai_server.enqueue_tool_calls([("repl_exec", {"source": "print(1)"})])
    loop = _loop(log, scripted_backend, tmp_path / "traces")
    try:
        for event in loop.iter_run("Print one.", run_id="run-test"):
            if type(event).__name__ == after:
                break
    finally:
        loop.context.close()
    end = _run_end(log)
    assert (end["status"], end["failure_type"]) == ("failed", "abandoned")
    assert end["failure"] == "the caller stopped reading the run's events before it ended"
