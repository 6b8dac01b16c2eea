"""The agent commands as a new user meets them, in real processes: no model configured (and
no local model importable) says exactly how to configure one, for each of ``scroll ask``,
``run`` and ``chat``; an API key from the environment never reaches the log, the payloads,
the trace, the terminal or the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer

SCROLL = Path(sys.executable).parent / "scroll"
TASK = "beam/100K/1"
SECRET = "sk-live-7Hq2ZsecretVALUEnever2Bseen9x"
_PROVIDER_VARIABLES = ("OPENAI_", "ANTHROPIC_", "SCROLL_")


def _bare_environ(tmp_path: Path) -> dict[str, str]:
    """The environment with no provider configured and llama_cpp unimportable."""
    site = tmp_path / "no-local-model"
    site.mkdir()
    # The import system's own seam: a None entry in sys.modules makes `import llama_cpp` fail
    # and importlib.util.find_spec('llama_cpp') return None, as when the extra is absent.
    (site / "sitecustomize.py").write_text(
        "import sys\nsys.modules['llama_cpp'] = None\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROVIDER_VARIABLES)}
    env["PYTHONPATH"] = str(site)
    return env


@pytest.mark.parametrize(
    ("command", "stdin"),
    [
        (["ask", "When does my first sprint end?"], ""),
        (["run", "count the lines of data.csv"], ""),
        (["chat"], "hello\n"),
    ],
)
def test_no_model_configured_prints_exactly_how_to_configure_one(
    command: list[str], stdin: str, tmp_path: Path
) -> None:
    env = _bare_environ(tmp_path)
    store = tmp_path / "store"
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('llama_cpp'))"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert probe.stdout.strip() == "None"  # the simulation holds in the child

    done = subprocess.run(
        [str(SCROLL), *command, "--store", str(store)],
        input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "Error: no model is configured and the local model is not installed. Configure one of:"
    )
    for needed in (
        "export OPENAI_BASE_URL=http://127.0.0.1:8000/v1",
        "export OPENAI_API_KEY=sk-...",
        "then pass --model openai:MODEL_NAME",
        "export ANTHROPIC_API_KEY=sk-ant-... and pass --model anthropic:MODEL_NAME",
        f"put [backends.openai] with model, base_url and api_key in {store / 'config.toml'}",
        "pip install 'scrollctx[local]' and pass --model local",
        "set SCROLL_MODEL=openai:MODEL_NAME",
    ):
        assert needed in done.stderr, needed
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("given_by", ["environment", "flags"])
def test_an_api_key_never_leaves_the_request(
    given_by: str, beam_store: Path, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    cell = (
        "import os\nprint(sorted(k for k in os.environ if 'KEY' in k), "
        "os.environ.get('OPENAI_API_KEY'))"
    )
    openai_server.enqueue_tool_calls([("recall_history_python", {"source": cell})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])
    env = {**_bare_environ(tmp_path), "SCROLL_STORE": str(beam_store)}
    flags = ["--base-url", openai_server.base_url, "--api-key", SECRET]
    if given_by == "environment":
        env.update(OPENAI_BASE_URL=openai_server.base_url, OPENAI_API_KEY=SECRET)
        flags = []

    done = subprocess.run(
        [str(SCROLL), "ask", "--model", "openai:scripted-model", *flags, "--task", TASK,
         "--json", "What is my key?"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "done"
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    observation = next(
        m["content"] for m in openai_server.requests[1].body["messages"] if m["role"] == "tool"
    )
    assert observation.startswith("stdout:\n[] None")  # the kernel never had the key
    assert SECRET not in done.stdout + done.stderr
    stored = [p for p in beam_store.rglob("*") if p.is_file()]
    assert Path(result["trace_path"]) in stored
    for path in stored:
        assert SECRET.encode() not in path.read_bytes(), path


def test_endpoint_flags_on_the_local_model_are_a_one_line_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCROLL), "ask", "--store", str(tmp_path / "s"), "--model", "local", "--base-url",
         "http://127.0.0.1:9/v1", "anything"],
        capture_output=True, text=True, env=_bare_environ(tmp_path), timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --base-url and --api-key apply to openai: and anthropic: models, not 'local'; "
        "drop them or pass --model openai:NAME"
    ]


# -- the reply cap: always sent, flag > config.toml > a default from the budget (issue 10) --


@pytest.mark.parametrize(
    ("config", "flags", "sent"),
    [
        ("", [], 4000),  # an eighth of the default 32,000-token budget
        ("[backends.openai.options]\nmax_tokens = 55\n", [], 55),
        ("[backends.openai.options]\nmax_tokens = 55\n", ["--max-tokens", "77"], 77),
    ],
    ids=["default", "config", "flag"],
)
def test_the_reply_cap_comes_from_flag_config_or_budget(
    config: str,
    flags: list[str],
    sent: int,
    beam_store: Path,
    openai_server: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from scrollctx.cli import run as scroll

    (beam_store / "config.toml").write_text(config, encoding="utf-8")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "soon"})])

    code = scroll(["ask", "--store", str(beam_store), "--model", "openai:m", *flags, "When?"])

    assert code == 0, capsys.readouterr().err
    assert openai_server.requests[0].body["max_tokens"] == sent


def test_an_option_the_backend_does_not_know_fails_before_any_request(
    beam_store: Path, scripted_backend: object
) -> None:
    from scrollctx.agent import Agent
    from scrollctx.errors import UsageError

    with pytest.raises(UsageError, match="unknown option temprature"):
        Agent(model=scripted_backend, store=beam_store, options={"temprature": 0})  # type: ignore[arg-type]


def test_a_workspace_that_does_not_exist_is_refused_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scrollctx.cli import run as scroll

    missing = tmp_path / "data"
    code = scroll(["run", "--store", str(tmp_path / "s"), "--workspace", str(missing), "x"])

    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not missing.exists()


def test_a_retry_is_shown_with_its_wait_and_a_rejection_is_not_retried(
    beam_store: Path,
    openai_server: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from scrollctx.cli import run as scroll

    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.enqueue_error(503, message="loading model", headers={"Retry-After": "0"})
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "soon"})])
    assert scroll(["ask", "--store", str(beam_store), "--model", "openai:m", "When?"]) == 0
    assert "loading model" in (err := capsys.readouterr().err)
    assert "retrying in 0.0 s (attempt 2 of 4)" in err

    openai_server.enqueue_error(400, message="'max_tokens' must be at most 2048")
    assert scroll(["ask", "--store", str(beam_store), "--model", "openai:m", "When?"]) == 1
    err = capsys.readouterr().err
    assert "the openai server rejected the request: 'max_tokens' must be at most 2048" in err
    assert "retrying" not in err and len(openai_server.requests) == 3


@pytest.mark.parametrize(
    ("command", "tool"),
    [
        (["run", "count the lines of data.csv"], "repl_exec"),
        (["ask", "When does my first sprint end?"], "recall_history_python"),
        (["chat"], "repl_exec"),
    ],
    ids=["run", "ask", "chat"],
)
def test_a_refused_cell_names_the_command_s_own_opt_out(
    command: list[str],
    tool: str,
    beam_store: Path,
    openai_server: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Strict with Landlock treated as missing (the policy's documented test knob): the cell is
    # refused, and the refusal tells the user the flag of the command they ran, not another's.
    import io

    from scrollctx.agent import _tools
    from scrollctx.cli import run as scroll
    from scrollctx.kernel import Kernel, SandboxPolicy

    def without_landlock(*args: Any, **kwargs: Any) -> Kernel:
        kwargs["sandbox"] = SandboxPolicy(unavailable=frozenset({"landlock"}))
        return Kernel(*args, **kwargs)

    monkeypatch.setattr(_tools, "Kernel", without_landlock)
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.enqueue_tool_calls([(tool, {"source": "print(1)"})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])

    code = scroll([*command, "--store", str(beam_store), "--model", "openai:m"])

    assert code == 0, capsys.readouterr().err
    observation = next(
        m["content"] for m in openai_server.requests[1].body["messages"] if m["role"] == "tool"
    )
    assert "cell refused" in observation
    assert f"`scroll {command[0]} --sandbox best-effort` (or off)" in observation
    assert "scroll exec" not in observation
