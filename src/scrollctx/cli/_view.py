"""``scroll view`` (a session's working view as the model receives it) and ``scroll simulate``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import Bounded, emit, json_option, store_option
from scrollctx.config import Config
from scrollctx.errors import UsageError
from scrollctx.log import EventLog, EventStore, open_existing_store, open_store
from scrollctx.view import WorkingView, simulate

__all__ = ["simulate_command", "view_command"]


@click.command("view")
@store_option
@click.option("--session", "session_id", required=True, help="Session id to show.")
@click.option(
    "--provider",
    type=click.Choice(["openai", "anthropic"]),
    default="openai",
    show_default=True,
    help="Message format to render.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=128_000,
    show_default=True,
    help="Window C in tokens (shown against the view size).",
)
@click.option(
    "--system-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="System prompt to show in the view (it is not stored in the log).",
)
@json_option
def view_command(
    config: Config,
    session_id: str,
    provider: str,
    budget: int,
    system_file: Path | None,
    json_: bool,
) -> None:
    """Print a session's working view and eviction index exactly as the model receives them.

    The view is restored from the Event Log (live turns, folds and the index).

    Example: scroll view --store .scroll --session s1 --provider anthropic --json
    """
    system = system_file.read_text(encoding="utf-8") if system_file else ""
    with open_existing_store(config) as log:
        if not _has_session(log, session_id):
            raise UsageError(f"session {session_id!r} has no events in {config.db_path}")
        view = WorkingView.restore(log, session_id, system, budget_tokens=budget)
        built = view.build(provider)
        data = {
            "session_id": session_id,
            "provider": provider,
            "tokens": built.tokens,
            "budget": budget,
            "live_turns": len(view.turns),
            "system": built.system,
            "messages": built.messages,
            "index": view.index_data(),
        }
    emit(data, as_json=json_, human=_human_view)


@click.command("simulate")
@store_option
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Exchanges to simulate.",
)
@click.option(
    "--output-kb",
    type=Bounded(min=0.0),
    default=8.0,
    show_default=True,
    help="Size of each tool output in KiB.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=256),
    default=32_000,
    show_default=True,
    help="Window C in tokens.",
)
@click.option(
    "--k", "k", type=click.IntRange(min=3), default=4, show_default=True, help="Index tier width."
)
@click.option(
    "--rho",
    type=Bounded(min=0.0, max=1.0, min_open=True),
    default=0.8,
    show_default=True,
    help="Eviction trigger as a share of the window.",
)
@click.option(
    "--evict-to",
    type=Bounded(min=0.0, max=1.0, min_open=True),
    default=None,
    help="Evict down to this share of the window (default: just under rho).",
)
@click.option(
    "--session", "session_id", default="simulation", show_default=True, help="Session id to write."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Content seed.")
@json_option
def simulate_command(
    config: Config,
    steps: int,
    output_kb: float,
    budget: int,
    k: int,
    rho: float,
    evict_to: float | None,
    session_id: str,
    seed: int,
    json_: bool,
) -> None:
    """Drive a scripted long session through a real log and view; compare with full replay.

    Uses a temporary store unless --store (or SCROLL_STORE) is given. No model is called.

    Example: scroll simulate --steps 2000 --output-kb 8 --budget 32000 --json
    """
    source = click.get_current_context().get_parameter_source("config")
    explicit = source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
    with tempfile.TemporaryDirectory(prefix="scroll-simulate-") as scratch:
        store = open_store(config) if explicit else EventLog.open(Path(scratch) / "history.db")
        with store as log:
            result = simulate(
                log,
                steps=steps,
                output_kb=output_kb,
                budget=budget,
                rho=rho,
                evict_to=evict_to,
                k=k,
                session_id=session_id,
                seed=seed,
            )
        data = result.to_dict()
        if not explicit:
            data["store"] = None
    emit(data, as_json=json_, human=_human_simulation)


def _has_session(log: EventStore, session_id: str) -> bool:
    rows = log.execute(
        "SELECT 1 FROM conversation_history WHERE session_id = ? LIMIT 1", (session_id,)
    )
    return bool(rows)


def _human_view(data: dict[str, Any]) -> str:
    lines = [
        f"session {data['session_id']}: {data['live_turns']} live turns, "
        f"{data['tokens']} / {data['budget']} tokens ({data['provider']})",
    ]
    if data["system"]:
        lines += ["", "── system ──", data["system"]]
    for message in data["messages"]:
        lines += ["", f"── {message['role']} ──", _message_text(message)]
    return "\n".join(lines)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    rest = {key: value for key, value in message.items() if key not in ("role", "content")}
    text = (
        content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=1)
    )
    if rest:
        text = f"{text or ''}\n{json.dumps(rest, ensure_ascii=False)}".strip()
    return text or ""


def _human_simulation(data: dict[str, Any]) -> str:
    calls = data["per_call_view_tokens"]
    quarter = max(1, len(calls) // 4)
    spread = [max(calls[i : i + quarter], default=0) for i in range(0, len(calls), quarter)]
    return "\n".join(
        [
            f"{data['steps']} steps, {data['calls']} model calls, "
            f"{data['history_tokens']:,} tokens of history",
            f"view tokens: max {data['max_view_tokens']:,}, mean {data['mean_view_tokens']:,}, "
            f"max per quarter {spread}",
            f"index: {data['index_tokens']:,} tokens, {data['index_blocks']} blocks, "
            f"{data['index_lines']} lines, {data['index_tiers']} tiers",
            f"view build: {data['final_view_build_ms']} ms at the end "
            f"(max {data['max_view_build_ms']} ms)",
            f"input tokens: {data['total_input_tokens']:,} vs full replay "
            f"{data['full_replay_input_tokens']:,} -> {data['input_token_saving_ratio']}x fewer",
            f"evictions {data['evictions']}, folds {data['folds']}, roll-ups {data['rollups']}, "
            f"headline compliance {data['headline_compliance']}",
        ]
    )
