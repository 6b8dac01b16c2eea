"""The JSON memory tools (``scroll-norepl``) run in a memory reader, never in the host.

Attack 7: ``ms_sql_query("SELECT randomblob(400000000)")`` once took the host to 3.1 GB and 31 s,
and ``ms_expand(lo=1, hi=10**30)`` raised an ``OverflowError`` that ended ``Agent.iter_run``
without a ``RunFinished``. Every argument a model can send is tried here: each call is an
observation (an answer or a tool error the model can act on), and the run goes on.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import Agent, Backend, RunFinished, ToolStep, json_memory_toolset
from scrollctx.agent._tools import ToolContext
from scrollctx.log import EventLog, Kind, NewEvent

_BOMB = "SELECT randomblob(400000000) AS b"


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolContext]:
    log = EventLog.open(tmp_path_factory.mktemp("tools") / "store" / "history.db")
    log.append_many(
        NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content=f"sprint {i}")
        for i in range(5)
    )
    context = ToolContext(log, session_id="s")
    yield context
    context.close()
    log.close()


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# (tool, arguments, whether it answers, a piece of the observation)
CALLS: list[tuple[str, dict[str, Any], bool, str]] = [
    ("ms_sql_query", {"sql": _BOMB}, False, "string or blob too big"),
    ("ms_sql_query", {"sql": "SELECT length(randomblob(300000000)) AS n"}, False, "too big"),
    ("ms_sql_query", {"sql": "DELETE FROM hist.conversation_history"}, False, "read-only"),
    ("ms_sql_query", {"sql": "SELECT ?"}, False, "matching parameters"),
    ("ms_sql_query", {"sql": None}, False, "does not start an SQL statement"),
    ("ms_sql_query", {"sql": "SELECT count(*) AS n FROM hist.conversation_history"}, True, '"n"'),
    ("ms_expand", {"lo": 1, "hi": 10**30}, True, '"seq": 5'),
    ("ms_expand", {"lo": -(10**30), "hi": 2}, True, '"seq": 2'),
    ("ms_expand", {"lo": "a", "hi": 3}, False, "takes two integer seqs"),
    ("ms_expand", {"lo": 1.5}, False, "takes two integer seqs"),
    ("ms_expand", {"hi": None, "lo": [1]}, False, "takes two integer seqs"),
    ("ms_expand", {"seqs": 5}, True, '"seq": 5'),
    ("ms_expand", {"seqs": [10**30, 2]}, True, "no event at seq"),
    ("ms_expand", {"seqs": "abc"}, False, "expand takes a seq"),
    ("ms_expand", {"seqs": [{"x": 1}]}, False, "is not a seq"),
    ("ms_expand", {"seqs": {"seq": 3}}, True, '"seq": 3'),
    ("ms_expand", {}, True, "[]"),
    ("ms_search", {"query": "sprint", "k": 10**30}, True, "row budget"),
    ("ms_search", {"query": "sprint", "k": "5"}, False, "k must be a positive integer"),
    ("ms_search", {"query": "sprint", "k": -1}, False, "k must be a positive integer"),
    ("ms_search", {"query": ["sprint"], "kind": 5}, False, "kind= takes a string"),
    ("ms_search", {"query": "sprint", "role": ["user", 3]}, False, "role= takes a string"),
    ("ms_search", {"query": "x" * 100_000}, True, "only the first 4000 were searched"),
    ("ms_search", {}, True, "no searchable words"),
]


@pytest.mark.parametrize(("name", "args", "answers", "shown"), CALLS)
def test_every_argument_is_an_observation_and_the_host_pays_nothing(
    context: ToolContext, name: str, args: dict[str, Any], answers: bool, shown: str
) -> None:
    tool = json_memory_toolset().get(name)
    assert tool is not None
    before, started = _peak_rss(), time.monotonic()
    observation = tool.run(args, context)
    assert observation.ok is answers and shown in observation.text, observation.text
    assert observation.ok or observation.text.startswith("error: ")
    assert _peak_rss() - before < 32 * 1024**2 and time.monotonic() - started < 10


def _store_fds(pid: int, db: str) -> int:
    return sum(1 for fd in Path(f"/proc/{pid}/fd").iterdir() if str(fd.resolve()).startswith(db))


def test_the_tools_never_open_the_store_in_the_host(context: ToolContext) -> None:
    db = str(context.log.path)
    host_before = _store_fds(os.getpid(), db)  # the writer's own descriptors
    tool = json_memory_toolset().get("ms_search")
    assert tool is not None and tool.run({"query": "sprint"}, context).ok
    assert _store_fds(os.getpid(), db) == host_before
    reader = context._reader
    assert reader is not None and reader.pid is not None and _store_fds(reader.pid, db) == 3


def test_a_reader_that_cannot_hold_names_the_context_s_own_opt_out(tmp_path: Path) -> None:
    # Strict with Landlock treated as missing (the policy's documented test knob): the JSON
    # tools' reader refuses the store, and says how the one who runs this context opts out.
    from scrollctx.kernel import SandboxPolicy

    log = EventLog.open(tmp_path / "store" / "history.db")
    log.append(NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content="sprint"))
    context = ToolContext(
        log,
        session_id="s",
        sandbox=SandboxPolicy(unavailable=frozenset({"landlock"})),
        opt_out="`scroll bench qa --sandbox best-effort`",
    )
    try:
        tool = json_memory_toolset().get("ms_search")
        assert tool is not None
        observation = tool.run({"query": "sprint"}, context)
    finally:
        context.close()
        log.close()
    assert not observation.ok and "sandbox does not hold" in observation.text, observation.text
    assert "opt out explicitly: `scroll bench qa --sandbox best-effort`" in observation.text


def test_a_run_with_a_query_bomb_and_a_huge_span_goes_on_to_its_answer(
    beam_store: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls([("ms_sql_query", {"sql": _BOMB})])
    openai_server.enqueue_tool_calls([("ms_expand", {"lo": 1, "hi": 10**30})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])

    with Agent(model=scripted_backend, store=beam_store, toolset=json_memory_toolset) as agent:
        events = list(agent.iter_run("Recall everything."))

    steps = [e for e in events if isinstance(e, ToolStep)]
    assert not steps[0].ok and "string or blob too big" in steps[0].observation
    assert steps[1].ok and steps[1].observation.startswith('[\n {\n  "seq": 1,')
    finished = events[-1]
    assert isinstance(finished, RunFinished) and finished.answer == "done" and finished.seq > 0
