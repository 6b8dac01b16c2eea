"""The README's MCP setup lines work as written: the Claude Code line, the Codex TOML and the
Cursor / Claude Desktop JSON name the same server, which the SDK client reaches; the Python
snippet runs and finds history."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from mcp_helpers import SCROLL, server_env, stdio_session

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parents[3] / "README.md"


def mcp_section() -> dict[str, list[str]]:
    """The fenced blocks of the README's MCP section, by language."""
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Use Scroll from any agent (MCP)", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, list[str]] = {}
    for language, body in re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL):
        blocks.setdefault(language, []).append(body)
    return blocks


def configured_commands() -> list[list[str]]:
    """The server command line each client's configuration names."""
    blocks = mcp_section()
    (claude,) = blocks["bash"]
    words = shlex.split(claude.strip())
    assert words[:4] == ["claude", "mcp", "add", "scroll"] and words[4] == "--"
    codex = tomllib.loads(blocks["toml"][0])["mcp_servers"]["scroll"]
    cursor = json.loads(blocks["json"][0])["mcpServers"]["scroll"]
    return [words[5:], [codex["command"], *codex["args"]], [cursor["command"], *cursor["args"]]]


async def test_every_client_configuration_starts_a_working_server(
    beam_store: Path, tmp_path: Path
) -> None:
    commands = configured_commands()
    assert all(command == commands[0] for command in commands), commands
    command, *args = commands[0]
    assert command == "scroll" and args[:2] == ["mcp", "--store"]
    home = Path(os.environ["HOME"])
    beam_store.rename(home / ".scroll")  # the configured store is ~/.scroll
    # ``~`` stays unexpanded (Codex and the JSON configs pass it as it is): scroll expands it.
    async with stdio_session(Path(args[2]), *args[3:], errlog=tmp_path / "err") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"scroll_search", "scroll_python"} <= names
        hits = await client.call_tool("scroll_search", {"query": "Flask", "k": 1})
        assert not hits.is_error


def test_the_python_snippet_runs(beam_store: Path, tmp_path: Path) -> None:
    (snippet,) = mcp_section()["python"]
    beam_store.rename(tmp_path / ".scroll")
    env = {**server_env(), "PATH": f"{Path(SCROLL).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    hits = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert len(hits) == 3 and all("seq" in hit for hit in hits)
