"""A real third-party client: simonw's ``llm`` CLI with an OpenAI-compatible model whose base URL
is the proxy, configured by its own ``extra-openai-models.yaml`` under a temporary
``LLM_USER_PATH``. Its conversation (``llm -c``) resends every earlier turn; the fact it asks
about at the end has left the upstream's view, and comes back through recall.

``llm`` is in the test dependency group (installed once with the suite, pinned with it), not a
venv made here: a test must not download anything, and CI reaches only the package index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from proxy_helpers import prompt_tokens
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from needs import missing
from scrollctx.serve.proxy import RECALL_TOOL

NOTE = " ".join(["the weather stayed mild and the river ran slow past the old mill"] * 70)
CELL = "for hit in ms.search('locker code', k=3):\n    print(hit['snippet'])"


def _model(request: RecordedRequest) -> ScriptedReply:
    """The scripted model: notes are acknowledged, the locker question is answered by recall."""
    messages = request.body["messages"]
    usage = (prompt_tokens(request), 7)
    results = [m for m in messages if m["role"] == "tool"]
    if results and "4512" in results[-1]["content"]:
        return ScriptedOpenAIServer.text_reply("Your locker code is 4512.", usage=usage)
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    if "locker code?" in asked:  # the question (the view may merge its index into that message)
        return ScriptedOpenAIServer.tool_calls_reply([(RECALL_TOOL, {"source": CELL})], usage=usage)
    return ScriptedOpenAIServer.text_reply("Noted.", usage=usage)


def _llm(user_path: Path, *args: str) -> str:
    command = shutil.which("llm", path=str(Path(sys.executable).parent))
    if command is None:
        missing("the llm CLI is not installed (it is in the test dependency group)")
    env = {**os.environ, "LLM_USER_PATH": str(user_path)}
    done = subprocess.run([command, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_llm_cli_gets_an_evicted_answer_through_the_proxy(
    openai_server: ScriptedOpenAIServer, start_proxy: Any, tmp_path: Path
) -> None:
    from scrollctx.serve.proxy import ViewSettings

    proxy = start_proxy(openai_server, view=ViewSettings(3_000, tail_groups=1, keep_results=1))
    user_path = tmp_path / "llm"
    user_path.mkdir()
    (user_path / "extra-openai-models.yaml").write_text(
        f"- model_id: scroll\n  model_name: scripted-model\n  api_base: {proxy.url}/v1\n"
    )
    openai_server.enqueue(*[_model] * 4)  # three prompts, one recall step
    _llm(user_path, "-m", "scroll", f"A note for you: {NOTE}. And my locker code is 4512.")
    _llm(user_path, "-c", f"Another note: {NOTE}.")
    answer = _llm(user_path, "-c", "What is my locker code?")
    assert answer == "Your locker code is 4512."
    asked, recalled = openai_server.requests[-2:]
    assert "4512" not in json.dumps(asked.body["messages"])  # evicted before the question
    assert any(m["role"] == "tool" and "4512" in m["content"] for m in recalled.body["messages"])
    assert asked.body["stream"] is True  # llm streams: the recall ran inside the stream
    sessions = proxy.proxy.conversations.sessions()
    assert len(sessions) == 1  # llm's resent history was recognised every time
