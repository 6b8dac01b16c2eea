"""What a model command shows on stderr while it works: finished steps, a live line, retries.

On a terminal (stderr is a TTY) a live line at the bottom says what is happening now and for how
long — ``step 2 · waiting for the model · 12.4 s (total 31.0 s)`` — while finished steps scroll
above it; text the model streams (``scroll chat``) shows in the live area until its step ends.
Off a terminal there is no live line and no colour: one plain line per finished step.

Retry notices of the backends (logger ``scrollctx.retry``: what failed, the wait, the next
attempt) are shown as lines either way, for as long as a view is open.

Everything here writes to stderr; stdout carries data only. Text from cells and models is
untrusted and passes :func:`terminal_safe` before it reaches a terminal.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Self

from scrollctx.agent import (
    AgentEvent,
    ContextEvicted,
    ModelStep,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolStep,
)
from scrollctx.agent.backends import RETRY_LOGGER
from scrollctx.cli._app import terminal_safe, warn

__all__ = ["BenchView", "LiveLine", "Screen", "StepView"]

_SHOWN = 160
_PREVIEW_LINES = 4


class LiveLine:
    """The live status line: a label, how long it has been shown, and the total time.

    rich re-renders it a few times a second (``__rich__``), so the clock moves while the
    command waits on a model that has not answered yet.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.since = self.started
        self.label = "starting"
        self.preview = ""

    def set(self, label: str) -> None:
        """Say what is happening now; its clock starts at zero. The label may hold a name the
        model chose (the tool it called): escaped, as the line is shown on a terminal only."""
        self.label = terminal_safe(label, is_terminal=True)
        self.since, self.preview = time.monotonic(), ""

    def add_preview(self, text: str) -> None:
        """Append streamed model text, shown under the line until the next :meth:`set`."""
        self.preview += text

    def render(self) -> str:
        """The line (and the tail of the streamed text) as plain text."""
        now = time.monotonic()
        line = f"{self.label} · {now - self.since:.1f} s (total {now - self.started:.1f} s)"
        if not self.preview.strip():
            return line
        tail = self.preview.strip().splitlines()[-_PREVIEW_LINES:]
        return "\n".join([*(terminal_safe(t, is_terminal=True) for t in tail), line])

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.render(), style="dim")


class Screen:
    """Lines and a live line on stderr: rich on a terminal, plain lines otherwise.

    Use it as a context manager: retry notices are shown while it is open; the live line shows
    from the first :meth:`status` until :meth:`idle` (chat, while it reads the next message)
    or the end.
    """

    def __init__(self, *, console: Any = None) -> None:
        self.console: Any = console
        if console is None and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True, highlight=False)
        self.live_line = LiveLine()
        self._live: Any = None
        self._handler = _RetryNotices(self)

    @property
    def is_terminal(self) -> bool:
        """Whether this screen is a terminal (live line, colour, progress lines)."""
        return self.console is not None and bool(self.console.is_terminal)

    def __enter__(self) -> Self:
        logging.getLogger(RETRY_LOGGER).addHandler(self._handler)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger(RETRY_LOGGER).removeHandler(self._handler)
        self.idle()

    def status(self, label: str) -> None:
        """Say what is happening now on the live line (shown on a terminal only)."""
        self.live_line.set(label)
        if self._live is None and self.is_terminal:
            from rich.live import Live

            self._live = Live(
                self.live_line, console=self.console, refresh_per_second=4, transient=True
            )
            self._live.start()

    def idle(self) -> None:
        """Take the live line away (nothing is running; the terminal is the user's)."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def line(self, text: str, style: str = "") -> None:
        """Print one finished line above the live line."""
        if self.console is not None:
            # Observations and model text are untrusted: no raw escape sequences on a terminal.
            text = terminal_safe(text, is_terminal=True)
            self.console.print(text, style=style or None, markup=False)
        else:
            warn(text)


class StepView(Screen):
    """Shows a run's events (and its live line) on stderr.

    ``quiet`` (chat) leaves out what the reply itself shows: the run and step banners, the
    model's text, the per-run summary and trace lines; tool calls, their results and failures
    stay.
    """

    def __init__(self, *, quiet: bool = False, console: Any = None) -> None:
        super().__init__(console=console)
        self.quiet = quiet

    def show(self, event: AgentEvent) -> None:
        """Render one event and move the live line on."""
        if isinstance(event, TextDelta):
            self.live_line.add_preview(event.text)
        elif isinstance(event, RunStarted):
            if not self.quiet:
                self.line(
                    f"run {event.run_id} | {event.model} | session {event.session_id}", "bold"
                )
            self.status("step 0 · waiting for the model")
        elif isinstance(event, ContextEvicted):
            self.line(
                f"  context: {event.tokens_before} -> {event.tokens_after} tokens "
                f"({event.evicted_turns} turns evicted)",
                "dim",
            )
        elif isinstance(event, ModelStep):
            self._model(event)
        elif isinstance(event, ToolStep):
            self._tool(event)
        elif isinstance(event, RunFinished):
            self._finished(event)

    def _model(self, event: ModelStep) -> None:
        if not self.quiet:
            said = event.headline or (event.text.splitlines()[0] if event.text else "")
            self.line(f"step {event.step_index}: {said[:_SHOWN]}", "cyan")
        for call in event.tool_calls:
            args = json.dumps(dict(call.arguments), ensure_ascii=False)
            self.line(f"  -> {call.name}({args[:_SHOWN]})")
        if event.tool_calls:
            self.status(f"step {event.step_index} · running {event.tool_calls[0].name}")
        else:
            self.status(f"step {event.step_index} · reading the answer")

    def _tool(self, event: ToolStep) -> None:
        lines = [
            line
            for line in event.observation.strip().splitlines()
            if line.strip() not in ("", "stdout:", "stderr:")
        ]
        more = len(lines) - 1
        text = (lines[0] if lines else "")[:_SHOWN] + (f" (+{more} lines)" if more > 0 else "")
        self.line(f"  <- {text}", "green" if event.ok else "red")
        self.status(f"step {event.step_index + 1} · waiting for the model")

    def _finished(self, event: RunFinished) -> None:
        self.idle()
        if event.failure:
            self.line(f"failed: {event.failure}", "bold red")
        if self.quiet:
            return
        metrics = event.metrics
        self.line(
            f"{event.status}: {metrics.step_count} steps, {metrics.tokens_in} tokens in, "
            f"{metrics.tokens_out} out, {metrics.wall_time_s:.1f} s",
            "bold",
        )
        if event.trace_path is not None:
            self.line(f"trace: {event.trace_path}")
        elif event.trace_error is not None:
            self.line(f"trace: none ({event.trace_error})", "yellow")


class BenchView(Screen):
    """``scroll bench run`` on a terminal: a line per finished question under a live count."""

    def __init__(self, *, console: Any = None) -> None:
        super().__init__(console=console)
        self.system, self.done, self.errors = "", 0, 0

    def start(self, system: str, questions: int, done: int) -> None:
        """A system's questions begin, ``done`` of them already answered by an earlier run."""
        self.system, self.done, self.errors, self.questions = system, done, 0, questions
        self._count()

    def record(self, record: dict[str, Any]) -> None:
        """One question finished (called from worker threads)."""
        scores = " ".join(f"{k}={v:.2f}" for k, v in (record.get("scores") or {}).items())
        tail = record.get("error") or scores or record.get("status")
        self.line(f"{record['system']} {record['qid']}: {record['status']} {tail}")
        self.done += 1
        self.errors += record.get("status") == "error"
        self._count()

    def _count(self) -> None:
        errors = f" · {self.errors} error{'s' if self.errors != 1 else ''}" if self.errors else ""
        self.status(f"{self.system} · {self.done} of {self.questions} questions done{errors}")


class _RetryNotices(logging.Handler):
    """Shows the backends' retry announcements as lines of the screen."""

    def __init__(self, view: Screen) -> None:
        super().__init__(logging.WARNING)
        self.view = view

    def emit(self, record: logging.LogRecord) -> None:
        self.view.line(f"  {record.getMessage()}", "yellow")
