"""Context policies for the evaluation's systems, built on the agent's ``ContextPolicy`` seam.

Scroll's own systems use the agent's default policy (its ``ScrollPolicy``, opened on the
probe session from the conversation's carried index, paper §3.3).

- :class:`WindowPolicy`: no Scroll: every turn of the session is sent, and when the window is
  exceeded the oldest exchanges are dropped (a tool call leaves with its results); if the
  first message alone is too long, its text is cut from the front, so the most recent part of
  a long history stays. Used by the summarization, retrieval, CodeAct and long-context
  baselines (the "Scroll w/o index" ablation keeps Scroll's view, without its index).

Invariants: every message is appended to the Event Log before it is kept; the first message
(the task) is never dropped, only cut; a tool call is never sent without its results; no two
plain user messages go out in a row (the digest joins the message before it when that is a
user message; ``openai_layout``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrollctx.agent import (
    ContextPolicy,
    Message,
    PolicyFactory,
    PolicyRequest,
    PreparedContext,
    persist_message,
)
from scrollctx.log import EventStore
from scrollctx.view import estimate_tokens, openai_layout

__all__ = ["WindowPolicy", "exchange_end", "message_tokens", "window_policy"]

_OVERHEAD = 4
_SHRINK = 0.7
_CUT_NOTE = "[the beginning of this message was cut to fit the context window]\n"


def window_policy() -> PolicyFactory:
    """A factory for :class:`WindowPolicy` (a carried index is not shown: it has none)."""

    def factory(request: PolicyRequest) -> ContextPolicy:
        return WindowPolicy(
            request.log,
            request.session_id,
            request.system_prompt,
            budget_tokens=request.budget_tokens,
            event_fields=request.event_fields,
        )

    return factory


def message_tokens(message: Mapping[str, Any]) -> int:
    """Estimated tokens of one message (content, tool calls, framing)."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += str(function.get("name", "")) + str(function.get("arguments", ""))
    return estimate_tokens(text) + _OVERHEAD


class WindowPolicy:
    """Every turn, oldest exchanges dropped to fit the window (see the module docstring)."""

    def __init__(
        self,
        log: EventStore,
        session_id: str,
        system_prompt: str,
        *,
        budget_tokens: int,
        event_fields: Mapping[str, Any] | None = None,
    ) -> None:
        self.log, self.session_id, self.system_prompt = log, session_id, system_prompt
        self.budget_tokens = budget_tokens
        self.event_fields = dict(event_fields or {})
        self.messages: list[Message] = []
        self.ratio = 1.0
        self._last_raw = 0

    def add(
        self, message: Message, *, synthetic: bool = False, fields: Mapping[str, Any] | None = None
    ) -> list[int]:
        """Append the message to the log and keep it."""
        merged = {**self.event_fields, **dict(fields or {})}
        seqs = persist_message(
            self.log, self.session_id, message, synthetic=synthetic, fields=merged
        )
        self.messages.append(message)
        return seqs

    def prepare(self, digest: str, *, shrink: bool = False) -> PreparedContext:
        """All kept messages, the oldest exchanges dropped until they fit."""
        if shrink:
            self.budget_tokens = max(1024, int(self.budget_tokens * _SHRINK))
        messages = list(self.messages)
        if digest:
            messages.append({"role": "user", "content": digest})
        raw = [message_tokens(m) for m in messages]
        before = self._scaled(sum(raw) + estimate_tokens(self.system_prompt))
        dropped = 0
        while (
            len(messages) > 1
            and self._scaled(sum(raw) + estimate_tokens(self.system_prompt)) > self.budget_tokens
        ):
            end = exchange_end(messages, 1)
            if end >= len(messages):
                break
            del messages[1:end], raw[1:end]
            dropped += end - 1
        total = sum(raw) + estimate_tokens(self.system_prompt)
        if messages and self._scaled(total) > self.budget_tokens:
            messages[0], raw[0] = self._cut_first(messages[0], total - raw[0])
            dropped += 1
        self._last_raw = sum(raw) + estimate_tokens(self.system_prompt)
        return PreparedContext(
            system=self.system_prompt,
            messages=self._laid_out(messages, digest),
            tokens=self._scaled(self._last_raw),
            tokens_before=before,
            evicted_turns=dropped,
        )

    @staticmethod
    def _laid_out(messages: list[Message], digest: str) -> list[Message]:
        """The digest (kept last while fitting) joins the message before it."""
        body = messages[:-1] if digest else messages
        return openai_layout(body, "", digest)  # type: ignore[arg-type, return-value]

    def _scaled(self, raw: int) -> int:
        return int(raw * self.ratio)

    def _cut_first(self, message: Message, others: int) -> tuple[Message, int]:
        text = str(message.get("content") or "")
        room = max(256, int(self.budget_tokens / self.ratio) - others - _OVERHEAD)
        share = room / max(1, estimate_tokens(text))
        kept = _CUT_NOTE + text[len(text) - int(len(text) * min(1.0, share)) :]
        cut: Message = {**message, "content": kept}
        return cut, message_tokens(cut)

    def observe_usage(self, prompt_tokens: int) -> None:
        """Learn the provider's tokens per estimated token (clamped to [0.5, 3])."""
        if prompt_tokens > 0 and self._last_raw > 0:
            self.ratio = min(3.0, max(0.5, prompt_tokens / self._last_raw))

    def index_text(self) -> str:
        """There is no index."""
        return ""


def exchange_end(messages: list[Message], start: int) -> int:
    """Index just past the exchange starting at ``start`` (an assistant call and its results)."""
    end = start + 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return end
