"""Tools of MCP servers inside the kernel: real third-party servers from the package index
(``mcp-server-time``, ``mcp-server-git`` on a temporary repository) called from cells through the
bridge and logged; a server that crashes mid-call, one that never answers a call, one that
never starts. Nothing hangs, and every failure is said in the observation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_servers import ScriptedOpenAIServer, tool_messages

from needs import import_or_missing
from procs import alive, descendants, wait_for
from scrollctx.agent import Agent, Backend, McpServerSpec
from scrollctx.errors import ConfigError, UsageError
from scrollctx.kernel import Kernel
from scrollctx.log import EventLog, Kind

BIN = Path(sys.executable).parent
FAULTY = Path(__file__).with_name("mcp_servers") / "faulty_server.py"


@pytest.fixture
def hub_class() -> type:
    import_or_missing("mcp")
    from scrollctx.agent._mcp import McpHub

    return McpHub


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    (path / "notes.txt").write_text("first line\n")
    for command in (["init", "-q"], ["add", "notes.txt"],
                    ["-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m",
                     "add notes"]):  # fmt: skip
        subprocess.run(["git", "-C", str(path), *command], check=True)
    return path


def installed(command: str) -> str:
    path = BIN / command
    if not path.exists():
        import_or_missing(command.replace("-", "_"))
    return str(path)


@pytest.fixture
def kernel_with(hub_class: type, event_log: EventLog, tmp_path: Path) -> Iterator[object]:
    """Start a hub over the given specs and a kernel bridged to its tools; close both after."""
    opened: list[tuple[object, Kernel]] = []

    def start(*specs: McpServerSpec) -> tuple[object, Kernel]:
        hub = hub_class(list(specs))
        hub.start()
        kernel = Kernel(event_log=event_log, session_id="mcp-test", scratch=tmp_path / "scratch",
                        tools=hub.kernel_functions(), timeout=30)  # fmt: skip
        opened.append((hub, kernel))
        return hub, kernel

    yield start
    for hub, kernel in opened:
        kernel.close()
        hub.close()  # type: ignore[attr-defined]


def test_third_party_servers_are_functions_in_the_kernel_and_every_call_is_logged(
    kernel_with: object, event_log: EventLog, repo: Path
) -> None:
    time_server = McpServerSpec("time", command=(installed("mcp-server-time"),
                                                 "--local-timezone", "UTC"))  # fmt: skip
    git_server = McpServerSpec("git", command=(installed("mcp-server-git"), "--repository",
                                               str(repo)))  # fmt: skip
    hub, kernel = kernel_with(time_server, git_server)  # type: ignore[operator]
    help_text = kernel.run_cell("help(time.get_current_time)").stdout
    assert "get_current_time(*, timezone: str)" in help_text and "timezone" in help_text
    now = kernel.run_cell("now = time.get_current_time(timezone='Europe/Paris')\n"
                          "print(type(now).__name__, now['timezone'])")  # fmt: skip
    assert now.stdout == "dict Europe/Paris\n", now.error
    status = kernel.run_cell(f"s = git.git_status(repo_path={str(repo)!r})\n"
                             "print(type(s).__name__, 'working tree clean' in s)")  # fmt: skip
    assert status.stdout == "str True\n", status.error
    log = kernel.run_cell(f"print(git.git_log(repo_path={str(repo)!r}, max_count=1))").stdout
    assert "add notes" in log

    events = [e for e in event_log.session_events("mcp-test") if e.tool_call_id]
    calls = [e for e in events if e.kind == Kind.TOOL_CALL]
    assert [c.name for c in calls] == ["time.get_current_time", "git.git_status", "git.git_log"]
    assert calls[0].tool_input == {"args": [], "kwargs": {"timezone": "Europe/Paris"}}
    result = next(e for e in events if e.kind == Kind.TOOL_RESULT)
    assert json.loads(result.content)["timezone"] == "Europe/Paris"  # the full result
    described = hub.describe()  # type: ignore[attr-defined]
    assert "`time.get_current_time(timezone)`: Get current time" in described
    assert "`git.git_log(repo_path, max_count=, start_timestamp=, end_timestamp=)`" in described
    refused = kernel.run_cell("time.get_current_time()")  # the schema's required argument
    assert refused.error is not None and "missing a required argument: 'timezone'" in refused.error


def test_a_server_that_crashes_mid_call_is_said_and_its_tools_withdrawn(
    kernel_with: object,
) -> None:
    faulty = McpServerSpec("faulty", command=(sys.executable, str(FAULTY)))
    hub, kernel = kernel_with(faulty)  # type: ignore[operator]
    assert kernel.run_cell("print(faulty.echo(text='hi'))").stdout == "hi\n"
    crashed = kernel.run_cell("faulty.crash()")
    assert crashed.error is not None
    assert "the MCP server 'faulty'" in crashed.error and "stopped during crash" in crashed.error
    assert "crashing on purpose" in crashed.error  # the tail of its stderr
    after = kernel.run_cell("faulty.echo(text='again')")
    assert after.error is not None and "is unavailable" in after.error
    described = hub.describe()  # type: ignore[attr-defined]
    assert "faulty.echo" not in described and "'faulty' is unavailable" in described


def test_a_server_that_never_answers_is_stopped_not_waited_for(kernel_with: object) -> None:
    stuck = McpServerSpec("stuck", command=(sys.executable, str(FAULTY)), timeout=1.0)
    silent = McpServerSpec("silent", command=(sys.executable, str(FAULTY), "--silent"),
                           startup_timeout=2.0)  # fmt: skip
    missing = McpServerSpec("missing", command=("no-such-mcp-server-here",))
    hub, kernel = kernel_with(stuck, silent, missing)  # type: ignore[operator]
    described = hub.describe()  # type: ignore[attr-defined]
    assert "'silent' is unavailable: it did not start within 2 s" in described
    assert "'missing' is unavailable: it failed to start" in described
    assert "stuck.hang" in described
    servers = {"--silent" in cmdline(p): p for p in descendants(os.getpid())
               if "faulty_server" in cmdline(p)}  # fmt: skip
    wait_for(lambda: not alive(servers[True]), "the silent server to be stopped")
    hung = kernel.run_cell("stuck.hang()")
    assert hung.error is not None and "did not answer hang within 1 s" in hung.error
    assert not hung.timed_out  # the call gave up well before the cell's own 30 s
    assert "stuck.echo" not in hub.describe()  # type: ignore[attr-defined]
    wait_for(lambda: not alive(servers[False]), "the stuck server to be stopped")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_specs_from_flags_and_config_are_checked() -> None:
    spec = McpServerSpec.parse("git=mcp-server-git --repository '/a b'")
    assert spec.command == ("mcp-server-git", "--repository", "/a b")
    assert McpServerSpec.parse("docs=https://example.com/mcp").url == "https://example.com/mcp"
    for bad, said in [("git", "NAME=COMMAND"), ("ms=x", "taken by the kernel"),
                      ("my-git=x", "Python identifier"), ("g='unclosed", "quotation")]:  # fmt: skip
        with pytest.raises(UsageError, match=said):
            McpServerSpec.parse(bad)
    table = {"url": "https://example.com/mcp", "bearer_token_env_var": "DOCS_TOKEN",
             "expose": "both"}  # fmt: skip
    made = McpServerSpec.from_config("docs", table, environ={"DOCS_TOKEN": "abc"})
    assert made.headers == {"Authorization": "Bearer abc"} and made.expose == "both"
    with pytest.raises(ConfigError, match="DOCS_TOKEN is not set"):
        McpServerSpec.from_config("docs", table, environ={})
    with pytest.raises(ConfigError, match="unknown key"):
        McpServerSpec.from_config("docs", {"url": "http://x", "comand": "y"})


def test_without_the_sdk_an_mcp_flag_says_what_to_install(tmp_path: Path) -> None:
    args = ["ask", "When?", "--store", str(tmp_path / "s"), "--model", "openai:m", "--mcp", "t=x"]
    code = (
        "import sys; sys.modules['mcp'] = None; from scrollctx.cli import run; "
        f"sys.exit(run({args!r}))"
    )
    env = {"PATH": str(BIN), "HOME": str(tmp_path), "OPENAI_API_KEY": "k"}
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert ran.returncode == 2, ran.stderr
    assert "pip install 'scrollctx[mcp]'" in ran.stderr


def test_an_agent_run_calls_mcp_tools_and_loses_a_dead_servers_tools(
    hub_class: type,
    beam_store: Path,
    scripted_backend: Backend,
    openai_server: ScriptedOpenAIServer,
) -> None:
    time_server = "time=" + installed("mcp-server-time") + " --local-timezone UTC"
    faulty = McpServerSpec("faulty", command=(sys.executable, str(FAULTY)), expose="both")
    source = "now = time.get_current_time(timezone='UTC')\nprint(now['timezone'])"
    openai_server.enqueue_tool_calls([("repl_exec", {"source": source})])
    openai_server.enqueue_tool_calls([("faulty__crash", {})])
    openai_server.enqueue_tool_calls([("submit_answer", {"answer": "done"})])
    with Agent(model=scripted_backend, store=beam_store, mcp=[time_server, faulty]) as agent:
        finished = agent.run("What time is it in UTC?")
    assert finished.answer == "done"

    first, second, third = (request.body for request in openai_server.requests)
    offered = [tool["function"]["name"] for tool in first["tools"]]
    assert {"faulty__echo", "faulty__crash", "faulty__hang"} <= set(offered)
    assert "MCP servers `time`, `faulty`" in first["messages"][0]["content"]
    state = first["messages"][-1]["content"]  # the kernel's state ends every request
    assert "`time.get_current_time(timezone)`" in state and "`faulty.echo(text)`" in state
    assert tool_messages(second) == ["stdout:\nUTC"]
    said = tool_messages(third)[-1]
    assert "the MCP server 'faulty'" in said and "stopped during crash" in said
    assert not [
        name for name in (t["function"]["name"] for t in third["tools"]) if "faulty" in name
    ]
    assert "'faulty' is unavailable" in third["messages"][-1]["content"]
    assert "`faulty.echo" not in third["messages"][-1]["content"]
