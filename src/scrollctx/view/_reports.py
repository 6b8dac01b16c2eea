"""What the working view reports: one eviction's effect, running metrics, a built request.

Pure values; :mod:`scrollctx.view._working` fills them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallSnapshot", "EvictionReport", "RenderedView", "ViewMetrics"]


@dataclass(slots=True)
class EvictionReport:
    """What one :meth:`WorkingView.ensure_budget` call did."""

    tokens_before: int
    tokens_after: int
    target: int
    folded: list[int] = field(default_factory=list)
    evicted: list[tuple[int, int]] = field(default_factory=list)
    evicted_turns: int = 0
    rollups: int = 0
    index_seq: int | None = None
    persist_error: str | None = None

    @property
    def changed(self) -> bool:
        """Whether anything was folded or evicted."""
        return bool(self.folded or self.evicted or self.evicted_turns)

    @property
    def over_target(self) -> bool:
        """Whether the view is still above ``rho * budget`` (only the protected part is left)."""
        return self.tokens_after > self.target


@dataclass(slots=True)
class ViewMetrics:
    """Counters of one view: evictions, folds, tokens, headline compliance, per-call sizes."""

    evictions: int = 0
    folds: int = 0
    rollups: int = 0
    evicted_turns: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    assistant_turns: int = 0
    headlined_turns: int = 0
    calls: int = 0
    call_tokens: list[int] = field(default_factory=list)
    last_build_ms: float = 0.0
    max_view_tokens: int = 0
    total_input_tokens: int = 0

    @property
    def headline_compliance(self) -> float | None:
        """Share of assistant responses that carried a headline (``None`` before the first)."""
        return self.headlined_turns / self.assistant_turns if self.assistant_turns else None

    def to_dict(self) -> dict[str, Any]:
        """Return the metrics as JSON-able data."""
        data = {name: getattr(self, name) for name in self.__slots__}
        data["headline_compliance"] = self.headline_compliance
        return data


@dataclass(frozen=True, slots=True)
class RenderedView:
    """A view ready to send: ``system`` separate (Anthropic) or inside ``messages`` (OpenAI)."""

    provider: str
    system: str
    messages: list[dict[str, Any]]
    tokens: int
    build_ms: float


@dataclass(frozen=True, slots=True)
class CallSnapshot:
    """The view one model call received, rebuilt from the log by :meth:`WorkingView.replay`."""

    seq: int
    """The call's response: the assistant turn written after it."""
    tokens: int
    """The view's size (the counter's tokens: an estimate unless it has a tokenizer)."""
    history_tokens: int
    """The system prompt, the digest and every turn so far unfolded: what replaying the
    whole history would have sent."""
    index_tokens: int
    live_turns: int
    evictions: int
    """Evictions so far in the session (cumulative, like ``folds`` and ``rollups``)."""
    folds: int
    rollups: int
