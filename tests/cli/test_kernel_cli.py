"""``scroll exec`` and ``scroll kernel doctor``: the observation the model sees; exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrollctx.cli import run
from scrollctx.log import EventLog, Kind, NewEvent

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def store(store_dir: Path) -> Path:
    with EventLog.open(store_dir / "history.db") as log:
        log.append(
            NewEvent(session_id="s1", kind=Kind.CONVERSATION, role="user",
                     content="We adopted a greyhound named Pixel.")
        )  # fmt: skip
    return store_dir


def test_exec_code_argument_prints_the_observation(store: Path, capsys: Capture) -> None:
    code = "hits = ms.search('greyhound')\nprint(hits[0]['content'])"
    assert run(["exec", code, "--store", str(store)]) == 0
    assert capsys.readouterr().out == "stdout:\nWe adopted a greyhound named Pixel.\n"


def test_exec_file_and_stdin(
    store: Path, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = tmp_path / "cell.py"
    cell.write_text("print(days_between('2024-01-01', '2024-03-01'))\n")
    assert run(["exec", "--file", str(cell), "--store", str(store)]) == 0
    assert capsys.readouterr().out == "stdout:\n60\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("1/0\n"))
    assert run(["exec", "-", "--store", str(store)]) == 1  # the cell raised
    captured = capsys.readouterr()
    assert captured.out.startswith("error: Traceback")
    assert captured.out.rstrip().endswith("division by zero")
    assert captured.err == "Error: the cell raised ZeroDivisionError: division by zero\n"


def test_exec_refused_without_a_layer_exits_2_and_names_the_opt_out(
    store: Path, capsys: Capture
) -> None:
    cell = "open('ran.txt', 'w').write('x')"
    code = run(["exec", cell, "--without", "landlock", "--store", str(store)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out.startswith("error: cell refused") and "stdout:" not in captured.out
    assert "landlock" in captured.out and "--sandbox best-effort" in captured.err
    assert not (store / "scratch" / "exec" / "ran.txt").exists()


def test_exec_opt_out_is_logged_and_shown(store: Path, capsys: Capture) -> None:
    assert run(["exec", "print('ran')", "--sandbox", "off", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "[sandbox] opt-out 'off': no sandbox layer is applied to this kernel",
        "stdout:",
        "ran",
    ]
    with EventLog.open(store / "history.db") as log:
        opt_outs = [e for e in log.session_events("exec") if e.metadata.get("opt_out")]
    assert len(opt_outs) == 1


def test_exec_bad_input_is_a_one_line_error(store: Path, tmp_path: Path, capsys: Capture) -> None:
    assert run(["exec", "1", "--file", "x.py", "--store", str(store)]) == 2
    assert capsys.readouterr().err.strip() == (
        "Error: give the cell either as CODE or with --file, not both"
    )
    assert run(["exec", "--file", str(tmp_path / "missing.py"), "--store", str(store)]) == 2
    assert "cannot read cell file" in capsys.readouterr().err
    assert run(["exec", "1", "--store", str(tmp_path / "nowhere")]) == 1
    assert "no store at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_exec_json_is_one_document_and_a_raising_cell_exits_1(store: Path, capsys: Capture) -> None:
    assert run(["exec", "--json", "n = 6 * 7\nprint(n)", "--store", str(store)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["ok"], document["stdout"], document["error"]) == (True, "42\n", None)
    assert document["observation"] == "stdout:\n42"
    assert document["digest"] == [{"name": "n", "type": "int", "summary": "= 42"}]

    assert run(["exec", "--json", "1/0", "--store", str(store)]) == 1
    captured = capsys.readouterr()
    failed = json.loads(captured.out)
    assert failed["ok"] is False and failed["error"].rstrip().endswith("division by zero")
    assert json.loads(captured.err) == {
        "error": {
            "type": "CellFailed",
            "message": "the cell raised ZeroDivisionError: division by zero",
        }
    }


def test_exec_of_a_file_name_says_use_file(
    store: Path, tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cell.py").write_text("print('from the file')\n")
    monkeypatch.chdir(tmp_path)

    assert run(["exec", "cell.py", "--store", str(store)]) == 2
    captured = capsys.readouterr()
    assert captured.err == "Error: cell.py is a file; to run it as a cell use --file cell.py\n"
    assert captured.out == ""
    assert run(["exec", "--file", "cell.py", "--store", str(store)]) == 0
    assert capsys.readouterr().out == "stdout:\nfrom the file\n"


def test_exec_without_code_on_a_terminal_is_a_usage_error(
    store: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    assert run(["exec", "--store", str(store)]) == 2
    assert "no cell given" in capsys.readouterr().err


def test_doctor_human_and_json(capsys: Capture) -> None:
    assert run(["kernel", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "strict profile: all layers hold" in out
    assert run(["kernel", "doctor", "--json", "--without", "landlock"]) == 2
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["strict_holds"] is False
    assert report["layers"]["landlock"]["state"] == "unavailable"
    assert report["layers"]["seccomp"]["state"] == "ok"
    assert json.loads(captured.err)["error"]["type"] == "SandboxUnavailable"


def test_console_script_exec(store: Path) -> None:
    script = Path(sys.executable).with_name("scroll")
    done = subprocess.run(
        [str(script), "exec", "print(6 * 7)", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "stdout:\n42\n")


def test_exec_escapes_control_characters_on_a_terminal_only(
    store: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hostile cell's escape sequences (OSC 52 writes the clipboard; \r hides a line) must not
    # reach the user's terminal raw; piped output stays exactly what the model sees.
    cell = "print('\\x1b]52;c;cm0gLXJmIH4=\\x07visible\\rhidden')"
    assert run(["exec", cell, "--store", str(store)]) == 0
    assert "\x1b]52;c;" in capsys.readouterr().out
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert run(["exec", cell, "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07visible\\x0dhidden" in shown
