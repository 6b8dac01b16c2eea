"""Terminal safety of every command, on a real pseudo-terminal: logged, imported and model text
never drives the terminal; piped output stays exact.

Each command runs as the installed ``scroll`` in its own process, its stdout and stderr on the
slave side of a pty (``pty.openpty``; the process sees a real terminal), and again piped.
"""

from __future__ import annotations

import ast
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import tty
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollctx.cli._app import terminal_safe
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import WorkingView

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent"))

from scripted_servers import ScriptedOpenAIServer, serve  # noqa: E402

SCROLL = Path(sys.executable).with_name("scroll")
CLI_SOURCES = Path(__file__).resolve().parents[2] / "src" / "scrollctx" / "cli"

# A title escape, an OSC 52 clipboard write, a C1 CSI, bidi override and isolate, zero-width
# space and joiner, a BOM, a tag character and a line separator.
HOSTILE = (
    "\x1b]0;owned\x07 \x1b]52;c;cGF5bG9hZA==\x07 \x9b31m \u202eevil\u202c \u2066iso\u2069 "
    "zero\u200bwidth\u200d \ufeff tag\U000e0041 sep\u2028end"
)
RAW = ["\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\u2066", "\u200b", "\u200d", "\ufeff",
       "\U000e0041", "\u2028"]  # fmt: skip
SHOWN = ["\\x1b]0;owned\\x07", "\\x1b]52;c;", "\\x9b31m", "\\u202eevil\\u202c", "\\u200b",
         "\\ufeff", "\\U000e0041", "\\u2028end"]  # fmt: skip
SESSION = "sess\u202eion"


def _run_on_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``scroll args`` with stdout and stderr on a raw pty; return its code and output."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no newline translation: the bytes the program wrote, exactly
    proc = subprocess.Popen(
        [str(SCROLL), *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the slave side is gone
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8")


def _run_piped(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(SCROLL), *args], capture_output=True, text=True, env=env, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("hostile")
    with EventLog.open(store / "history.db") as log:
        log.append_many(
            [
                NewEvent(session_id=SESSION, kind="user_message", role="user",
                         content=f"payload {HOSTILE}"),
                NewEvent(session_id=SESSION, kind=f"kind{HOSTILE}", role="assistant",
                         content="ok", headline=f"head {HOSTILE}"),
            ]
        )  # fmt: skip
        view = WorkingView(log, SESSION, budget_tokens=10_000)
        view.add({"role": "user", "content": f"view {HOSTILE}"})
        view.persist()
    return store


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedOpenAIServer]:
    server = serve(ScriptedOpenAIServer)
    assert isinstance(server, ScriptedOpenAIServer)
    yield server
    server.stop()


def _env(store: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SCROLL_", "OPENAI_"))}
    return {**keep, "SCROLL_STORE": str(store), "COLUMNS": "200"}


COMMANDS = {
    "search": ["search", "payload"],
    "expand": ["expand", "1-2"],
    "sql": ["sql", "SELECT content, headline FROM hist.conversation_history"],
    "sessions": ["sessions"],
    "stats": ["stats"],
    "view": ["view", "--session", SESSION],
    "exec": ["exec", f"print({HOSTILE!r})", "--sandbox", "best-effort", "--session", "tty"],
    "search --json": ["search", "payload", "--json"],
    "error message": ["expand", "1", "--store", f"/nonexistent/{HOSTILE}"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_terminal_sees_hostile_text_escaped_and_a_pipe_sees_it_exact(
    hostile_store: Path, command: str
) -> None:
    args, env = COMMANDS[command], _env(hostile_store)
    code, screen = _run_on_terminal(args, env)
    assert not [c for c in RAW if c in screen], screen
    if command == "search --json":
        assert json.loads(screen)[0]["content"] == f"payload {HOSTILE}"  # same data, escaped
    elif command != "sessions":  # (sessions shows only the session id: its bidi control)
        assert all(shown in screen for shown in SHOWN[:2]), screen
    piped_code, out, err = _run_piped(args, env)
    assert piped_code == code
    if command == "search --json":  # JSON escapes controls itself; the rest passes as it is
        assert json.loads(out)[0]["content"] == f"payload {HOSTILE}" and "\u202e" in out
    else:  # exact when not a terminal
        assert (SESSION if command == "sessions" else "\x1b]52;c;cGF5bG9hZA==\x07") in out + err


def test_ask_shows_the_model_reply_and_steps_escaped_on_a_terminal(
    hostile_store: Path, model: ScriptedOpenAIServer
) -> None:
    model.enqueue_tool_calls([("submit_answer", {"answer": HOSTILE})])
    env = _env(hostile_store)
    args = ["ask", "--model", "openai:scripted-model", "--base-url", model.base_url,
            "--sandbox", "best-effort", "what did I say?"]  # fmt: skip
    code, screen = _run_on_terminal(args, env)
    assert code == 0, screen
    screen = re.sub(r"\x1b\[[0-9;]*m", "", screen)  # rich's own styling of the step lines
    assert not [c for c in RAW if c in screen], screen
    assert "\\x1b]52;c;" in screen.splitlines()[-1]  # the answer, on stdout
    model.enqueue_tool_calls([("submit_answer", {"answer": HOSTILE})])
    code, out, _ = _run_piped(args, env)
    assert code == 0 and out == HOSTILE + "\n"


def test_terminal_safe_escapes_whole_unicode_categories_not_a_hand_list() -> None:
    for code in (*range(0x3000), *range(0xE0000, 0xE0100), 0x1D173, 0x110BD, 0x13430):
        char = chr(code)
        shown = terminal_safe(char, is_terminal=True)
        unsafe = unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp", "Cs"}
        assert (shown != char) == (unsafe and char not in "\n\t"), hex(code)
    assert terminal_safe("a\tb\nc é 漢字 🙂", is_terminal=True) == "a\tb\nc é 漢字 🙂"
    assert terminal_safe(HOSTILE, is_terminal=False) == HOSTILE


def test_every_cli_module_prints_through_the_safe_helpers() -> None:
    # A new command cannot bypass terminal_safe by accident: click.echo and print live only in
    # cli/_app.py (emit, echo, warn); everything else calls those.
    offenders = []
    for path in sorted(CLI_SOURCES.glob("*.py")):
        if path.name == "_app.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in {"echo", "secho", "print", "write"} and not (
                isinstance(func, ast.Name) and func.id == "echo"
            ):
                owner = ast.unparse(func)
                if owner not in {"self.console.print"}:  # rich, fed through terminal_safe
                    offenders.append(f"{path.name}:{node.lineno}: {owner}(...)")
    assert offenders == [], "print through cli._app's emit/echo/warn instead: " + str(offenders)
