"""Agent commands: ``scroll run``, ``scroll ask`` and ``scroll chat``.

The model options are the shared bundle of :mod:`scrollctx.cli._models`: ``--model`` (or
``SCROLL_MODEL``); ``--base-url`` and ``--api-key`` for the endpoint of an ``openai`` or
``anthropic`` model (they override ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, or the
``ANTHROPIC_`` pair; the environment is the safer place for a key, which never reaches the log,
the trace or the terminal); ``--max-tokens`` (each reply) and ``--timeout`` (each request).
``--max-steps`` and ``--max-run-tokens`` bound the whole run.

Stdout carries data only: the answer (or one JSON document with ``--json``; chat prints each
reply). Progress goes to stderr: a live view of the steps (rich on a TTY, plain lines
otherwise) and, at the end of every run, ``trace: PATH``. Exit codes: 0 when the run answered,
1 when it ended with a failure record, 2 when no model is configured (the message says how to
configure one).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import click

from scrollctx.agent import (
    RUBRICS,
    Agent,
    AgentEvent,
    ChatSession,
    RunFinished,
)
from scrollctx.cli._app import echo, emit, json_option, store_option, warn
from scrollctx.cli._models import ModelCall, model_options
from scrollctx.cli._progress import StepView
from scrollctx.cli._view_options import ViewFlags, view_options
from scrollctx.config import Config
from scrollctx.kernel import PROFILES

__all__ = ["ask_command", "chat_command", "run_command"]

_SHOWN = 160


def _agent_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The model options (:func:`model_options`) and the run's limits and sandbox."""
    options = [
        click.option("--max-steps", "max_steps", type=click.IntRange(min=1), default=30,
                     show_default=True, help="Give up after this many model calls."),
        click.option("--max-run-tokens", "max_run_tokens", type=click.IntRange(min=1),
                     metavar="N", help="Give up after N tokens in and out over the run."),
        click.option("--sandbox", "sandbox", type=click.Choice(PROFILES), default="strict",
                     show_default=True, help="Kernel sandbox profile."),
        click.option("--mcp", "mcp", multiple=True, metavar="'NAME=COMMAND ARGS'",
                     help="An MCP server whose tools cells call as NAME.tool(...) (repeatable; "
                          "NAME=URL for HTTP; also [mcp.servers.NAME] in config.toml)."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return model_options(view_options(func))


def _open_agent(
    config: Config, model_call: ModelCall, view_flags: ViewFlags, **settings: Any
) -> Agent:
    agent = Agent(
        model=model_call.model,
        store=config.store_dir,
        environ=model_call.environ(),
        options=model_call.backend_options(),
        **view_flags.agent_settings(),
        **settings,
    )
    warn(f"context window C = {agent.budget.tokens:,} tokens ({agent.budget.source})")
    return agent


def _settings(
    door: str, max_steps: int, max_run_tokens: int | None, sandbox: str, mcp: tuple[str, ...]
) -> dict[str, Any]:
    # A cell refused for a missing layer names this command's own opt-out.
    return {"max_steps": max_steps, "max_run_tokens": max_run_tokens, "sandbox": sandbox,
            "mcp": mcp, "opt_out": f"`scroll {door} --sandbox best-effort` (or off)"}  # fmt: skip


def _drive(events: Iterator[AgentEvent], view: StepView) -> RunFinished:
    finished: RunFinished | None = None
    try:
        with _signals_interrupt():
            for event in events:
                view.show(event)
                if isinstance(event, RunFinished):
                    finished = event
    except KeyboardInterrupt as exc:
        why = str(exc) or "interrupted"
        view.line(f"{why}: the run is recorded as failed (interrupted) in the log", "bold")
        raise
    if finished is None:
        raise click.ClickException("the run ended without a result")
    return finished


def _result(finished: RunFinished, as_json: bool) -> int:
    if as_json:
        document = {
            "status": finished.status,
            "answer": finished.answer,
            "failure": finished.failure,
            "failure_type": finished.failure_type,
            "run_id": finished.run_id,
            "session_id": finished.session_id,
            "trace_path": str(finished.trace_path) if finished.trace_path else None,
            "trace_error": finished.trace_error,
            "metrics": finished.metrics.to_dict(),
        }
        emit(document, as_json=True, human=str)
    elif finished.answer is not None:
        _echo_answer(finished.answer)
    return 0 if finished.ok else 1


def _echo_answer(answer: str) -> None:
    """Print an answer on stdout; on a terminal, escape control characters the model wrote."""
    echo(answer)


@click.command(name="run")
@click.argument("task")
@click.option("--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="An existing folder: the kernel's writable one (default: a new "
              "<store>/workspaces/ID).")  # fmt: skip
@_agent_options
@store_option
@json_option
def run_command(
    config: Config,
    task: str,
    workspace: Path | None,
    model_call: ModelCall,
    view_flags: ViewFlags,
    max_steps: int,
    max_run_tokens: int | None,
    sandbox: str,
    mcp: tuple[str, ...],
    json_: bool,
) -> int:
    """Do a task with an agent that writes Python in a sandboxed kernel.

    Example: scroll run "count the lines of every .csv file" --workspace ./data --model local
    """
    settings = _settings("run", max_steps, max_run_tokens, sandbox, mcp)
    with (
        _open_agent(config, model_call, view_flags, workspace=workspace, **settings) as agent,
        StepView() as view,
    ):
        finished = _drive(agent.iter_run(task), view)
    return _result(finished, json_)


@click.command(name="ask")
@click.argument("question")
@click.option("--task", "task_id", metavar="TASK_ID",
              help="Bind recall to one imported conversation (e.g. beam/100K/1).")  # fmt: skip
@click.option("--rubric", type=click.Choice(RUBRICS), help="Benchmark data layout and format.")
@_agent_options
@store_option
@json_option
def ask_command(
    config: Config,
    question: str,
    task_id: str | None,
    rubric: str | None,
    model_call: ModelCall,
    view_flags: ViewFlags,
    max_steps: int,
    max_run_tokens: int | None,
    sandbox: str,
    mcp: tuple[str, ...],
    json_: bool,
) -> int:
    """Answer a question over an ingested history (the paper's memory setting).

    Example: scroll ask --store .scroll "What is my sprint target?" --task beam/100K/1 --rubric beam
    """
    settings = _settings("ask", max_steps, max_run_tokens, sandbox, mcp)
    with _open_agent(config, model_call, view_flags, **settings) as agent, StepView() as view:
        events = agent.iter_ask(question, task_id=task_id, rubric=rubric)
        finished = _drive(events, view)
    return _result(finished, json_)


@click.command(name="chat")
@click.option("--session", "session_id", metavar="ID", help="Continue (or start) this session.")
@click.option("--new", "new", is_flag=True, help="Start a new session instead of the last one.")
@_agent_options
@store_option
def chat_command(
    config: Config,
    session_id: str | None,
    new: bool,
    model_call: ModelCall,
    view_flags: ViewFlags,
    max_steps: int,
    max_run_tokens: int | None,
    sandbox: str,
    mcp: tuple[str, ...],
) -> int:
    """Chat with an agent whose context Scroll manages; it continues across restarts.

    Reads one message per line (stdin), prints each reply on stdout; /exit or end of input ends.
    Example: scroll chat --model openai:gpt-4o-mini   (later: scroll chat, to continue)
    """
    settings = _settings("chat", max_steps, max_run_tokens, sandbox, mcp)
    agent = _open_agent(config, model_call, view_flags, stream=True, **settings)
    with agent, agent.chat(session_id, new=new) as chat, StepView(quiet=True) as view:
        view.line(_banner(chat))
        try:
            for message in _messages(view):
                finished = _drive(chat.iter_send(message), view)
                if finished.answer is not None:
                    _echo_answer(finished.answer)
        except KeyboardInterrupt:
            view.line(f"chat session {chat.session_id} is saved; continue it with: {_resume(chat)}")
            raise
    return 0


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """While a run is driven, SIGTERM and SIGHUP (``timeout``, ``docker stop``, a closed ssh
    session) interrupt it as Ctrl-C does, so the run records its end instead of vanishing."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"terminated by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _resume(chat: ChatSession) -> str:
    return f"scroll chat --session {chat.session_id}"


def _banner(chat: ChatSession) -> str:
    if chat.is_new:
        return f"new chat session {chat.session_id}; /exit to leave (later: {_resume(chat)})"
    answered = f"{chat.earlier_runs} earlier message{'s' if chat.earlier_runs > 1 else ''}"
    return (
        f"continuing chat session {chat.session_id} ({answered}); /exit to leave, "
        "scroll chat --new to start over"
    )


def _messages(view: StepView) -> Iterator[str]:
    interactive = sys.stdin.isatty()
    while True:
        view.idle()
        if interactive:
            echo("you> ", err=True, nl=False)
        line = sys.stdin.readline()
        if not line:
            return
        text = line.strip()
        if text in ("/exit", "/quit"):
            return
        if text:
            yield text
