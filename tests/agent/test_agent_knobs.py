"""Every knob of the paper's protocol reaches the view, from the flags or from config.toml,
and the window C says where it came from. Real HTTP to the scripted server (a test double)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted_servers import ScriptedOpenAIServer

from scrollctx.agent import Agent
from scrollctx.agent._windows import MAX_DEFAULT_BUDGET, table_window
from scrollctx.cli import run
from scrollctx.errors import ConfigError, UsageError
from scrollctx.view import ViewSettings

FOLDED = "[tool output folded"


def _cells(server: ScriptedOpenAIServer, count: int) -> None:
    for n in range(count):
        cell = f"print('out{n} ' * 400)"
        server.enqueue_tool_calls([("repl_exec", {"source": cell})], usage=None)
    server.enqueue_tool_calls([("submit_answer", {"answer": "done"})], usage=None)


def _folded(server: ScriptedOpenAIServer) -> int:
    last = server.requests[-1].body["messages"]
    return sum(str(m["content"]).startswith(FOLDED) for m in last if m["role"] == "tool")


def _scroll_run(store: Path, *flags: str) -> int:
    return run(["run", "--store", str(store), "--model", "openai:scripted-model", *flags, "go"])


@pytest.fixture
def endpoint(openai_server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in openai_server.environ.items():
        monkeypatch.setenv(name, value)


def test_the_view_flags_and_model_options_reach_the_requests(
    openai_server: ScriptedOpenAIServer,
    endpoint: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Four cells of about 800 estimated tokens each: with the defaults (keep 3 results, a
    16k window) nothing is folded; with --keep-results 1 --tail-groups 1 and a 6,000-token
    window the older results are folded to seq pointers. --model-option reaches the body."""
    _cells(openai_server, 4)
    assert _scroll_run(tmp_path / "a", "--budget-tokens", "16000") == 0
    assert _folded(openai_server) == 0
    assert "context window C = 16,000 tokens (budget_tokens" in capsys.readouterr().err
    openai_server.reset()
    _cells(openai_server, 4)
    flags = ["--budget-tokens", "6000", "--keep-results", "1", "--tail-groups", "1"]
    flags += ["--rho", "0.7", "--index-k", "3", "--model-option", "temperature=0.25"]
    flags += ["--model-option", "seed=7"]
    assert _scroll_run(tmp_path / "b", *flags) == 0
    assert _folded(openai_server) >= 2
    body = openai_server.requests[-1].body
    assert (body["temperature"], body["seed"]) == (0.25, 7)


@pytest.mark.parametrize("command", [["run"], ["ask"], ["chat"], ["bench", "run"]])
def test_every_agent_command_takes_every_view_knob(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([*command, "--help"]) == 0
    shown = capsys.readouterr().out
    knobs = ["--budget-tokens", "--rho", "--index-k", "--tail-groups", "--keep-results"]
    knobs += ["--prompts", "--model-option", "--base-url", "--api-key"]
    assert [knob for knob in knobs if knob not in shown] == []


def test_config_toml_sets_the_view_and_a_flag_wins(
    openai_server: ScriptedOpenAIServer, endpoint: None, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text(
        "[view]\nbudget_tokens = 6000\nrho = 0.7\nkeep_results = 1\ntail_groups = 1\n",
        encoding="utf-8",
    )
    _cells(openai_server, 4)
    assert _scroll_run(store) == 0
    from_config = _folded(openai_server)
    assert from_config >= 2
    openai_server.reset()
    _cells(openai_server, 4)
    assert _scroll_run(store, "--keep-results", "3", "--tail-groups", "2") == 0
    assert _folded(openai_server) <= 1 < from_config  # the flags protect the newest three


def test_bad_view_settings_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--rho 1.5"):
        ViewSettings.resolve(None, rho=1.5)
    store = tmp_path / "s"
    store.mkdir()
    (store / "config.toml").write_text("[view]\nindex_k = 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"\[view\] index_k = 2: the tier width"):
        Agent(model="openai:m", store=store, environ={"OPENAI_API_KEY": "sk-x"})
    (store / "config.toml").write_text("[view]\nwindow = 9\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown \\[view\\] key 'window'"):
        Agent(model="openai:m", store=store, environ={"OPENAI_API_KEY": "sk-x"})


def test_the_window_comes_from_the_server_then_the_table_then_the_default(
    openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    environ = openai_server.environ
    openai_server.model_metadata["scripted-model"] = {"max_model_len": 16384}
    with Agent(model="openai:scripted-model", store=tmp_path, environ=environ) as agent:
        assert agent.budget.tokens == 16384 - 4096
        assert agent.budget.source.startswith("the server's /v1/models: window 16,384")
    with Agent(model="openai:gpt-4o-mini", store=tmp_path, environ=environ) as agent:
        assert agent.budget.tokens == 128_000 - 4096
        assert agent.budget.source == "the model table (gpt-4o): window 128,000 less the reply"
    with Agent(model="openai:vendor/gpt-4.1-nano", store=tmp_path, environ=environ) as agent:
        assert agent.budget.tokens == MAX_DEFAULT_BUDGET and "capped" in agent.budget.source
    with Agent(model="openai:my-finetune", store=tmp_path, environ=environ) as agent:
        assert (agent.budget.tokens, agent.budget.source) == (
            32_000,
            "the default 32,000 (the model's window is unknown)",
        )
    assert table_window("GPT-4-0613") == ("gpt-4", 8_192)
    assert table_window("gpt-4o-2024-08-06") == ("gpt-4o", 128_000)


def test_bench_records_say_how_backbone_judge_and_view_were_set(
    openai_server: ScriptedOpenAIServer,
    endpoint: None,
    shared_data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The backbone and the judge on separate endpoints (the judge's given by its own flags),
    each with its own options, and every record saying so (never a key)."""
    judge = ScriptedOpenAIServer()
    judge.start()
    try:
        openai_server.enqueue_tool_calls([("submit_answer", {"answer": "not enough info"})])
        judge.enqueue_text('{"score": 1.0, "reason": "ok"}')
        out = tmp_path / "r.jsonl"
        args = ["bench", "run", "--benchmark", "beam", "--categories", "abstention"]
        args += ["--limit", "1", "--data", str(shared_data), "--out", str(out), "--json"]
        args += ["--model", "openai:scripted-model", "--model-option", "temperature=0.6"]
        args += ["--budget-tokens", "20000", "--rho", "0.9"]
        args += ["--judge-model", "openai:judge", "--judge-base-url", judge.base_url]
        args += ["--judge-api-key", "sk-judge-secret-key-0001", "--judge-option", "seed=3"]
        assert run(args) == 0
        capsys.readouterr()
        (record,) = [json.loads(line) for line in out.read_text().splitlines()]
        (judged,) = judge.requests
        assert judged.headers["authorization"] == "Bearer sk-judge-secret-key-0001"
        assert judged.body["seed"] == 3 and judged.body["temperature"] == 0.0
        assert openai_server.requests[0].body["temperature"] == 0.6
        settings = record["model_settings"]
        assert settings["options"] == {"temperature": 0.6}
        assert settings["base_url"] == openai_server.base_url
        assert settings["view"]["budget_tokens"] == 20000 and settings["view"]["rho"] == 0.9
        assert record["budget"]["tokens"] == 20000
        assert record["judge_settings"]["base_url"] == judge.base_url
        assert record["judge_settings"]["options"] == {"seed": 3}
        assert "sk-judge-secret-key-0001" not in out.read_text()
    finally:
        judge.stop()
