"""The typed events one agent run yields, in order, and the run's metrics.

A run yields :class:`RunStarted`, then per step a :class:`ContextEvicted` (only when the context
policy evicted something), one :class:`ModelStep` and one :class:`ToolStep` per action, and
always ends with exactly one :class:`RunFinished`, whose ``status`` is ``"answered"`` (the model
called ``submit_answer``), ``"replied"`` (chat: the model answered in plain text) or
``"failed"`` (with ``failure`` saying why, and ``failure_type`` classifying it: the class name
of the error that ended the run, such as ``RateLimited`` or ``WorkerCrashed``, or one of
:data:`LOOP_FAILURES` when the loop itself gave up). Every event names the Event Log ``seq`` it
was written at: the loop appends to the log before it yields. The one exception is
:class:`TextDelta`, yielded only by a loop that streams: a preview of the model's answer while it
arrives, which the log records whole, as the :class:`ModelStep` that follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrollctx.agent.backends import ToolCall, Usage

__all__ = [
    "LOOP_FAILURES",
    "AgentEvent",
    "ContextEvicted",
    "ModelStep",
    "RunFinished",
    "RunMetrics",
    "RunStarted",
    "TextDelta",
    "ToolStep",
]

LOOP_FAILURES = ("step_limit", "token_budget", "interrupted", "ended_early")
"""``failure_type`` values of runs the loop ended itself (no error was raised)."""


@dataclass(slots=True)
class RunMetrics:
    """What a run cost: the paper's trace metrics."""

    tokens_in: int = 0
    tokens_out: int = 0
    wall_time_s: float = 0.0
    step_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the metrics in the trace's shape."""
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "wall_time_s": round(self.wall_time_s, 3),
            "step_count": self.step_count,
        }


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began; ``seq`` is its ``system`` event (the task itself is the next user turn)."""

    seq: int
    run_id: str
    session_id: str
    task_id: str | None
    task: str
    model: str


@dataclass(frozen=True, slots=True)
class ContextEvicted:
    """The context policy folded or evicted turns before a model call."""

    step_index: int
    tokens_before: int
    tokens_after: int
    evicted_turns: int
    index_seq: int | None


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's answer as it streams in (no log row: the ModelStep has it all)."""

    step_index: int
    text: str
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class ModelStep:
    """The model answered. ``text`` is what a user may see (the headline line stripped)."""

    seq: int
    step_index: int
    text: str
    headline: str | None
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One action ran; ``observation`` is exactly the text the model receives next."""

    seq: int
    step_index: int
    tool: str
    args: Mapping[str, Any]
    observation: str
    ok: bool


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended: with an answer, a chat reply, or an explicit failure record.

    ``seq`` is the ``run_end`` event's, or 0 when the Event Log refused to record it;
    ``trace_error`` says why there is no ``trace_path`` when a trace was asked for.
    """

    seq: int
    run_id: str
    session_id: str
    status: str
    answer: str | None
    failure: str | None
    trace_path: Path | None
    metrics: RunMetrics = field(default_factory=RunMetrics)
    failure_type: str | None = None
    trace_error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run ended with an answer or a reply."""
        return self.status != "failed"


AgentEvent = RunStarted | ContextEvicted | TextDelta | ModelStep | ToolStep | RunFinished
