"""Model call N rebuilt from the log is byte for byte what the provider received on call N."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evicting_run import ANSWER, BUDGET, CALLS, enqueue_evicting_run
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import Agent, Backend, call_changes, rebuild_call
from scrollctx.errors import UsageError
from scrollctx.log import EventLog
from scrollctx.view import call_seqs


def test_every_call_of_an_evicting_run_is_rebuilt_exactly(
    tmp_path: Path, scripted_backend: Backend, openai_server: ScriptedOpenAIServer
) -> None:
    enqueue_evicting_run(openai_server)
    with Agent(model=scripted_backend, store=tmp_path / "store", budget_tokens=BUDGET) as agent:
        finished = agent.run("Print a lot, then answer done.")
    assert finished.answer == ANSWER

    with EventLog.open_read_only(tmp_path / "store" / "history.db") as log:
        seqs = call_seqs(log, finished.session_id)
        assert len(seqs) == len(openai_server.requests) == CALLS
        previous = None
        evicted = folded = 0
        for number, request in enumerate(openai_server.requests, start=1):
            call = rebuild_call(log, finished.session_id, number)
            sent = request.body["messages"]
            assert json.dumps(call.wire_messages()) == json.dumps(sent), number
            assert call.system == sent[0]["content"]
            assert (call.digest is not None and f"w{number - 2}" in call.digest) or number == 1
            changes = call_changes(log, call, previous.seq if previous else None)
            evicted += len(changes.evicted)
            folded += len(changes.folded)
            previous = call
        assert evicted > 0 and folded > 0
        assert previous is not None and previous.view.index_text()
        with pytest.raises(UsageError, match="has 15 model calls; there is no call 16"):
            rebuild_call(log, finished.session_id, 16)
