"""Exit codes and error output of the ``scroll`` command, decided in one place."""

from __future__ import annotations

import json

import click
import pytest

from scrollctx.cli._app import invoke, make_group, terminal_safe
from scrollctx.errors import IntegrityError, UsageError


def _group_with(callback: object) -> click.Group:
    group = make_group()

    @group.command()
    def probe() -> None:
        """Probe. Example: scroll probe"""
        callback()  # type: ignore[operator]

    return group


def test_ctx_exit_code_is_kept() -> None:
    def leave() -> None:
        click.get_current_context().exit(4)

    assert invoke(_group_with(leave), ["probe"]) == 4


@pytest.mark.parametrize("error,code", [(UsageError("bad flag"), 2), (IntegrityError("torn"), 3)])
def test_scroll_errors_map_to_their_exit_code(
    error: Exception, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail() -> None:
        raise error

    assert invoke(_group_with(fail), ["probe"]) == code
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == f"Error: {error}"


def test_json_errors_are_one_object_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    group = make_group()

    @group.command()
    @click.option("--json", "json_", is_flag=True)
    def probe(json_: bool) -> None:
        """Probe. Example: scroll probe --json"""
        raise UsageError("nothing to show")

    assert invoke(group, ["probe", "--json"]) == 2
    err = json.loads(capsys.readouterr().err)
    assert err == {"error": {"type": "UsageError", "message": "nothing to show"}}


def test_unexpected_exception_is_one_line_with_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    def crash() -> None:
        raise RuntimeError("boom")

    assert invoke(_group_with(crash), ["probe"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--debug" in err and "Traceback" not in err


def test_usage_error_from_click_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(_group_with(lambda: None), ["probe", "--nope"]) == 2
    assert "--nope" in capsys.readouterr().err


def test_interrupt_exits_130() -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    assert invoke(_group_with(interrupt), ["probe"]) == 130


def test_terminal_safe_escapes_control_sequences_only_for_a_terminal() -> None:
    hostile = "ok\tcol\n\x1b]52;c;cGF5bG9hZA==\x07\x9bred"
    assert terminal_safe(hostile, is_terminal=False) == hostile
    assert (
        terminal_safe(hostile, is_terminal=True) == "ok\tcol\n\\x1b]52;c;cGF5bG9hZA==\\x07\\x9bred"
    )


def test_the_agent_step_view_never_writes_raw_escapes_to_a_terminal() -> None:
    import io

    from rich.console import Console

    from scrollctx.agent import ToolStep
    from scrollctx.cli._progress import StepView

    screen = io.StringIO()
    view = StepView()
    view.console = Console(file=screen, force_terminal=True, color_system=None, width=200)
    view.show(
        ToolStep(
            seq=1,
            step_index=0,
            tool="repl_exec",
            args={},
            observation="stdout:\n\x1b]0;owned\x07title",
            ok=True,
        )
    )
    assert "\x1b]0;owned" not in screen.getvalue()
    assert "\\x1b]0;owned\\x07title" in screen.getvalue()


def test_bare_scroll_prints_its_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    from scrollctx.cli import run

    assert run([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Usage: scroll") and "Commands:" in captured.out
    assert captured.err == ""
