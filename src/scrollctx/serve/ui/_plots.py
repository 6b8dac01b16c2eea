"""Server-rendered SVG plots of a session's model calls, with matplotlib (as the bench).

The numbers come from :meth:`WorkingView.replay`: one pass over the session, the view each
call received rebuilt by the view's own restore steps. What the endpoint reported
(``usage.prompt_tokens``) and each call's budget are drawn where the agent loop logged them.
Figures are built with the object API (no pyplot state), so rendering is safe in any thread.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from scrollctx.agent import call_digest
from scrollctx.errors import MissingDependency
from scrollctx.log import EventLog
from scrollctx.view import CallSnapshot, WorkingView, call_seqs

__all__ = ["PLOTS", "SessionCalls", "plot_svg", "session_calls"]

PLOTS = {
    "tokens": "View tokens per call against the budget",
    "cumulative": "Cumulative input tokens against full-history replay",
    "evictions": "Evictions and folds per call",
}


@dataclass(frozen=True, slots=True)
class SessionCalls:
    """Per-call numbers of one session (index i is call i + 1)."""

    snapshots: list[CallSnapshot]
    reported: list[int | None]
    budgets: list[int | None]


def session_calls(log: EventLog, session_id: str) -> SessionCalls:
    """Replay the session once; read what each call's response logged about it."""
    snapshots = list(WorkingView.replay(log, session_id, budget_tokens=1, digest_of=call_digest))
    reported: list[int | None] = []
    budgets: list[int | None] = []
    for event in log.events(call_seqs(log, session_id)):
        meta = event.metadata.get("model_call") or {}
        usage = meta.get("usage") or {}
        reported.append(usage.get("prompt_tokens"))
        budgets.append(meta.get("budget_tokens"))
    return SessionCalls(snapshots, reported, budgets)


def plot_svg(name: str, calls: SessionCalls, title: str) -> bytes:
    """Draw plot ``name`` (a key of :data:`PLOTS`) as SVG."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependency("matplotlib", "ui") from exc
    figure = Figure(figsize=(8.0, 3.6))
    axis = figure.add_subplot()
    numbers = list(range(1, len(calls.snapshots) + 1))
    _DRAW[name](axis, numbers, calls)
    axis.set_xlabel("model call")
    # The title holds a session id: logged text, never matplotlib's $math$ markup.
    axis.set_title(f"{title}: {PLOTS[name].lower()}", fontsize=10, parse_math=False)
    axis.grid(alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=8)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="svg")
    return out.getvalue()


def _tokens(axis: Any, numbers: list[int], calls: SessionCalls) -> None:
    axis.plot(numbers, [s.tokens for s in calls.snapshots], label="view (rebuilt, estimated)")
    reported = [(n, r) for n, r in zip(numbers, calls.reported, strict=True) if r is not None]
    if reported:
        axis.plot(*zip(*reported, strict=True), ".", ms=3, label="reported by the endpoint")
    budgets = [(n, b) for n, b in zip(numbers, calls.budgets, strict=True) if b is not None]
    if budgets:
        axis.step(*zip(*budgets, strict=True), where="post", color="red", label="budget C")
    axis.set_ylabel("tokens")


def _cumulative(axis: Any, numbers: list[int], calls: SessionCalls) -> None:
    view = full = 0
    views, fulls = [], []
    for snapshot in calls.snapshots:
        view += snapshot.tokens
        full += snapshot.history_tokens
        views.append(view)
        fulls.append(full)
    axis.plot(numbers, views, label="sent (the bounded view)")
    axis.plot(numbers, fulls, label="full-history replay")
    if views and views[-1]:
        axis.set_yscale("log")
    axis.set_ylabel("cumulative input tokens")


def _evictions(axis: Any, numbers: list[int], calls: SessionCalls) -> None:
    evictions, folds = [], []
    last_e = last_f = 0
    for snapshot in calls.snapshots:
        evictions.append(snapshot.evictions - last_e)
        folds.append(snapshot.folds - last_f)
        last_e, last_f = snapshot.evictions, snapshot.folds
    axis.bar(numbers, folds, label="folds", color="tab:orange")
    axis.bar(numbers, evictions, bottom=folds, label="evictions", color="tab:blue")
    axis.set_ylabel("per call")


_DRAW = {"tokens": _tokens, "cumulative": _cumulative, "evictions": _evictions}
