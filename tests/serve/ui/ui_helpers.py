"""Helpers of the inspector's tests: the test store's contents, and uvicorn in a thread.

The store (built once per test session) holds what a user's store holds:

- a real agent run against the scripted OpenAI-compatible server (the test double for the
  model, ``tests/agent/scripted_servers.py``) whose working view folds and evicts, with every
  request the server received kept for byte comparison;
- the Claude Code fixtures of ``../shared/data/transcripts/claude-code`` (sub-agents
  included), imported with ``ingest_path``;
- a hostile session: a logged ``<script>``, terminal escapes and bidi controls, and a 10 MB
  tool result.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "agent"))

from evicting_run import ANSWER, BUDGET, enqueue_evicting_run  # noqa: E402
from scripted_servers import ScriptedOpenAIServer, serve  # noqa: E402

from needs import import_or_missing  # noqa: E402
from scrollctx.log import EventLog, NewEvent  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
CLAUDE_FIXTURES = SHARED_DATA / "transcripts" / "claude-code"
HOSTILE = "hostile-session"
SCRIPT = "<script>document.title='pwned';window.pwned=1</script>"
ESCAPES = "\x1b]0;owned\x07 then \x1b[31mred\x1b[0m and \u202etxt.exe and zero\u200bwidth"
BIG_BYTES = 10 * 1024 * 1024
BIG_TAIL = "END-OF-THE-TEN-MEGABYTES"


def bench_record(qid: str, category: str, score: float) -> dict[str, Any]:
    """A result record as ``scroll bench run`` writes it (one BEAM question)."""
    return {
        "benchmark": "beam", "size": "100K", "system": "scroll", "qid": qid,
        "history": qid.split("#")[0], "category": category, "status": "scored",
        "scores": {"judge": score}, "tokens_in": 1000, "tokens_out": 100, "turns": 3,
        "wall_time_s": 2.0, "corpus_share": 0.01,
    }  # fmt: skip


@dataclass(frozen=True)
class UIStore:
    """The test store and what went into it."""

    path: Path
    run_session: str
    requests: list[Any]
    """The bodies the scripted server received, call by call."""
    big_seq: int
    script_seq: int
    escapes_seq: int
    results: Path
    """A folder with one bench result file."""


def agent_run(store: Path) -> tuple[str, list[Any]]:
    """Run the evicting script through a real agent into ``store``; return the session and
    the request bodies the scripted server received."""
    from scrollctx.agent import Agent
    from scrollctx.agent.backends._openai import OpenAIBackend

    server = serve(ScriptedOpenAIServer)
    assert isinstance(server, ScriptedOpenAIServer)
    try:
        enqueue_evicting_run(server)
        backend = OpenAIBackend(model="scripted-model", base_url=server.base_url, api_key="sk-x")
        with Agent(model=backend, store=store, budget_tokens=BUDGET) as agent:
            finished = agent.run("Print fourteen batches, then answer.")
        backend.close()
        assert finished.answer == ANSWER, finished.failure
        return finished.session_id, [request.body for request in server.requests]
    finally:
        server.stop()


def hostile_session(log: EventLog) -> tuple[int, int, int]:
    script, escapes = log.append_many(
        [
            NewEvent(session_id=HOSTILE, kind="user_message", role="user", content=SCRIPT),
            NewEvent(session_id=HOSTILE, kind="model_turn", role="assistant", content=ESCAPES),
        ]
    )
    line = "0123456789abcdef" * 4 + "\n"
    big = line * (BIG_BYTES // len(line)) + BIG_TAIL
    seq = log.append(
        NewEvent(
            session_id=HOSTILE, kind="tool_result", role="tool", name="repl_exec",
            tool_call_id="call_big", content=big,
        )
    )  # fmt: skip
    return seq, script, escapes


class ServedApp:
    """An ASGI app served by real uvicorn on a loopback port the OS picked, in a thread."""

    def __init__(self, app: Any) -> None:
        uvicorn = import_or_missing("uvicorn")
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and self.thread.is_alive():  # poll a condition
            assert time.monotonic() < deadline, "uvicorn did not start in 30 s"
            time.sleep(0.01)
        assert self.server.started, "uvicorn did not start"
        self.port = int(self.server.servers[0].sockets[0].getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
