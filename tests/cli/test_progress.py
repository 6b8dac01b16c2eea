"""What the model commands show on stderr while they work (``cli/_progress.py``), on a
terminal-like console in process; the same views on a real pseudo-terminal are in
``tests/agent/test_agent_terminal.py``."""

from __future__ import annotations

import io
import logging
import re

from rich.console import Console

from scrollctx.agent import ModelStep, RunFinished
from scrollctx.agent.backends import RETRY_LOGGER, ToolCall
from scrollctx.cli._progress import BenchView, LiveLine, StepView


def _console(screen: io.StringIO) -> Console:
    return Console(file=screen, force_terminal=True, color_system=None, width=200)


def test_the_live_line_says_what_how_long_and_the_total() -> None:
    live = LiveLine()
    live.set("step 3 · waiting for the model")

    assert re.fullmatch(
        r"step 3 · waiting for the model · \d+\.\d s \(total \d+\.\d s\)", live.render()
    )


def test_streamed_text_shows_its_last_lines_above_the_line_escaped() -> None:
    live = LiveLine()
    live.set("step 0 · waiting for the model")
    live.add_preview("one\ntwo\nthree\nfour\nfive \x1b]0;owned\x07")

    lines = live.render().splitlines()
    assert lines[:4] == ["two", "three", "four", "five \\x1b]0;owned\\x07"]
    assert lines[4].startswith("step 0 · waiting for the model")
    live.set("step 0 · running repl_exec")
    assert "five" not in live.render()  # a new phase starts without the old preview


def test_a_tool_name_the_model_chose_reaches_the_live_line_escaped() -> None:
    # The name went into the live line raw: an OSC title, a colour and a bidi override reached
    # the terminal while every other line showing it was escaped.
    name = "evil\x1b]0;PWNT\x1b\\\x1b[41m\u202ered"
    call = ToolCall(id="c1", name=name, arguments={}, raw_arguments="{}")
    view = StepView(console=_console(io.StringIO()))
    view.show(ModelStep(seq=1, step_index=0, text="", headline=None, reasoning="",
                        tool_calls=(call,), usage=None, elapsed_s=0.1))  # fmt: skip
    shown = view.live_line.render()
    view.idle()
    assert shown.startswith("step 0 · running evil\\x1b]0;PWNT\\x1b\\\\x1b[41m\\u202ered · ")
    assert not set(shown) & {"\x1b", "\u202e"}


def test_a_run_whose_trace_could_not_be_written_says_why() -> None:
    screen = io.StringIO()
    why = "the trace could not be written to /t: No space left on device"
    with StepView(console=_console(screen)) as view:
        view.show(RunFinished(seq=9, run_id="r", session_id="s", status="answered", answer="ok",
                              failure=None, trace_path=None, trace_error=why))  # fmt: skip
    assert f"trace: none ({why})" in screen.getvalue()


def test_retry_notices_show_while_a_view_is_open_and_only_then() -> None:
    screen = io.StringIO()
    logger = logging.getLogger(RETRY_LOGGER)
    with StepView(console=_console(screen)):
        logger.warning("openai is unavailable (HTTP 503); retrying in 2.0 s (attempt 2 of 4)")
    logger.warning("after the view closed")

    assert "retrying in 2.0 s (attempt 2 of 4)" in screen.getvalue()
    assert "after the view closed" not in screen.getvalue()


def test_the_bench_view_counts_questions_and_errors() -> None:
    screen = io.StringIO()
    with BenchView(console=_console(screen)) as view:
        view.start("scroll", 5, done=2)
        view.record({"system": "scroll", "qid": "q3", "status": "scored", "scores": {"f1": 0.5}})
        view.record({"system": "scroll", "qid": "q4", "status": "error", "error": "RateLimited"})
        assert view.live_line.label == "scroll · 4 of 5 questions done · 1 error"

    assert "scroll q3: scored f1=0.50" in screen.getvalue()
    assert "scroll q4: error RateLimited" in screen.getvalue()


def test_off_a_terminal_there_is_no_live_line() -> None:
    view = StepView(console=Console(file=io.StringIO(), force_terminal=False))
    with view:
        view.status("step 0 · waiting for the model")
        assert view._live is None
