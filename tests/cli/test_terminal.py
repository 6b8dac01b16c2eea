"""Terminal safety of every command, on a real pseudo-terminal: logged, imported and model text
never drives the terminal; piped output stays exact.

Each command runs as the installed ``scroll`` in its own process, its stdout and stderr on the
slave side of a pty (``pty.openpty``; the process sees a real terminal), and again in this
process with its output captured (not a terminal).
"""

from __future__ import annotations

import ast
import io
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

from scrollctx.cli import run
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


def _run_on_terminal(args: list[str], env: dict[str, str], stdin: str = "") -> tuple[int, str]:
    """Run ``scroll args`` with stdout and stderr on a raw pty; return its code and output."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # no newline translation: the bytes the program wrote, exactly
    proc = subprocess.Popen(
        [str(SCROLL), *args], stdin=subprocess.PIPE, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(stdin.encode("utf-8"))
    proc.stdin.close()
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


class Piped:
    """The same command in this process, its output captured (not a terminal): the exact text."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
        self.capsys, self.monkeypatch = capsys, monkeypatch

    def __call__(self, args: list[str], store: Path, stdin: str = "") -> tuple[int, str, str]:
        self.monkeypatch.setenv("SCROLL_STORE", str(store))
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        self.capsys.readouterr()
        code = run(args)
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err


@pytest.fixture
def piped(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Piped:
    return Piped(capsys, monkeypatch)


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
    hostile_store: Path, command: str, piped: Piped
) -> None:
    args, env = COMMANDS[command], _env(hostile_store)
    code, screen = _run_on_terminal(args, env)
    assert not [c for c in RAW if c in screen], screen
    if command == "search --json":
        assert json.loads(screen)[0]["content"] == f"payload {HOSTILE}"  # same data, escaped
    elif command != "sessions":  # (sessions shows only the session id: its bidi control)
        assert all(shown in screen for shown in SHOWN[:2]), screen
    piped_code, out, err = piped(args, hostile_store)
    assert piped_code == code
    if command == "search --json":  # JSON escapes controls itself; the rest passes as it is
        assert json.loads(out)[0]["content"] == f"payload {HOSTILE}" and "\u202e" in out
    else:  # exact when not a terminal
        assert (SESSION if command == "sessions" else "\x1b]52;c;cGF5bG9hZA==\x07") in out + err


AGENT = {
    "ask": (["ask", "what did I say?"], ""),
    "run": (["run", "count the files"], ""),
    "chat": (["chat", "--new"], "hello\n"),
}


@pytest.mark.parametrize("command", sorted(AGENT))
def test_the_model_reply_and_steps_are_escaped_on_a_terminal(
    hostile_store: Path, model: ScriptedOpenAIServer, tmp_path: Path, command: str, piped: Piped
) -> None:
    env = _env(hostile_store)
    args, stdin = AGENT[command]
    args = [*args, "--model", "openai:scripted-model", "--base-url", model.base_url,
            "--sandbox", "best-effort"]  # fmt: skip
    if command == "run":
        args += ["--workspace", str(tmp_path)]
    model.enqueue_tool_calls([("submit_answer", {"answer": HOSTILE})])
    code, screen = _run_on_terminal(args, env, stdin)
    assert code == 0, screen
    # rich's own CSI sequences: the step lines' styling and the live line's cursor moves (the
    # hostile text holds OSC sequences and a C1 CSI, which stay caught)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert not [c for c in RAW if c in screen], screen
    assert "\\x1b]52;c;" in screen.splitlines()[-1]  # the answer, on stdout
    model.enqueue_tool_calls([("submit_answer", {"answer": HOSTILE})])
    code, out, _ = piped(args, hostile_store, stdin)
    assert code == 0 and out == HOSTILE + "\n"


def test_bench_report_names_a_hostile_file_escaped_on_a_terminal(
    tmp_path: Path, piped: Piped
) -> None:
    results = tmp_path / f"results{HOSTILE.replace(chr(0x2028), '')}.jsonl"
    results.write_text("{not json\n", encoding="utf-8")
    args = ["bench", "report", str(results), "--out", str(tmp_path / "report")]
    code, screen = _run_on_terminal(args, _env(tmp_path))
    assert code == 2, screen
    assert not [c for c in RAW if c in screen] and "\\x1b]52;c;" in screen, screen
    code, _, err = piped(args, tmp_path)
    assert code == 2 and "\x1b]52;c;cGF5bG9hZA==\x07" in err


def test_the_ingest_progress_bar_shows_a_hostile_file_name_escaped(tmp_path: Path) -> None:
    name = f"[bold]chat{HOSTILE}.json"
    (tmp_path / name).write_text(json.dumps([{"role": "user", "content": "hi"}]), "utf-8")
    code, screen = _run_on_terminal(["ingest", str(tmp_path / name)], _env(tmp_path / "store"))
    assert code == 0, screen
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # rich's own cursor moves and colours
    assert not [c for c in RAW if c in screen], screen
    assert "[bold]chat\\x1b]0;owned\\x07" in screen  # as written: not markup, not a title


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
