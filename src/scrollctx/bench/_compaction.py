"""The summarization agent's context (paper Table 3, baseline (i)): compacted during the run.

:class:`CompactingPolicy` keeps every turn of the session, like the plain window, until the
context exceeds ``rho`` of the window; then the backbone folds the older exchanges (everything
between the task and the last ``tail`` exchanges) into a running summary of the agent's own
work, which rides in the task message from then on (so roles still alternate), and those
exchanges leave the context. What was compacted is gone for good: there is no recall. Each
compaction repeats when the context fills again; the plain window's cut stays as the last
resort when even the task and the summary do not fit.

Invariants: every message, and each summary written, is appended to the Event Log before it
is used (a summary as a synthetic user event, ``metadata.compaction``); a tool call never
leaves without its results; the tokens the summaries cost are counted (``tokens_in`` /
``tokens_out``) and added to the task's by the system that runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrollctx.agent import Message, PreparedContext
from scrollctx.bench._policies import WindowPolicy, exchange_end, message_tokens
from scrollctx.bench._summaries import Summarizer
from scrollctx.log import EventStore
from scrollctx.view import estimate_tokens

__all__ = ["COMPACTION_PROMPT", "CompactingPolicy"]

COMPACTION_PROMPT = (
    "You keep the working notes of an agent that is answering one question with tools. Below "
    "are its current notes (possibly empty) and the next part of its work: its tool calls and "
    "what they returned. Write the new notes: keep what still matters and add what the new "
    "part found: which searches ran, the evidence with its seq numbers and exact values "
    "(names, numbers with units, dates), what was ruled out, and what is left to check. Write "
    "at most {words} words. Reply with the notes only.\n\nCurrent notes:\n{summary}\n\n"
    "Next part of the work:\n{text}"
)
_HEADER = "\n\n[your notes on the earlier steps, compacted when your context filled]\n"


class CompactingPolicy(WindowPolicy):
    """The plain window, with the older exchanges compacted into notes when it fills."""

    def __init__(
        self,
        log: EventStore,
        session_id: str,
        system_prompt: str,
        *,
        budget_tokens: int,
        summarizer: Summarizer,
        rho: float = 0.8,
        tail: int = 2,
        event_fields: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            log, session_id, system_prompt, budget_tokens=budget_tokens, event_fields=event_fields
        )
        self.summarizer, self.rho, self.tail = summarizer, rho, tail
        self.notes = ""
        self.compactions = 0
        self.tokens_in = self.tokens_out = 0
        self._task: Message | None = None

    def prepare(self, digest: str, *, shrink: bool = False) -> PreparedContext:
        """Compact the older exchanges if the context is over ``rho`` of the window, then fit."""
        if self._over(digest):
            self._compact()
        return super().prepare(digest, shrink=shrink)

    def _over(self, digest: str) -> bool:
        raw = sum(message_tokens(m) for m in self.messages) + estimate_tokens(self.system_prompt)
        raw += estimate_tokens(digest)
        return self._scaled(raw) > self.rho * self.budget_tokens

    def _compact(self) -> None:
        starts = _exchange_starts(self.messages)
        if len(starts) <= self.tail:
            return
        cut = starts[-self.tail] if self.tail else len(self.messages)
        older = self.messages[1:cut]
        self.notes, used_in, used_out = self.summarizer.update(self.notes, _as_text(older))
        self.tokens_in, self.tokens_out = self.tokens_in + used_in, self.tokens_out + used_out
        self.compactions += 1
        if self._task is None:
            self._task = self.messages[0]
        task = {**self._task, "content": f"{self._task.get('content')}{_HEADER}{self.notes}"}
        kept = self.messages[cut:]
        note: Message = {"role": "user", "content": self.notes}
        fields = {"metadata": {"compaction": {"number": self.compactions, "turns": len(older)}}}
        super().add(note, synthetic=True, fields=fields)  # logged; in the context via the task
        self.messages = [task, *kept]  # type: ignore[list-item]


def _exchange_starts(messages: list[Message]) -> list[int]:
    """Where each exchange after the task starts (a call and its results are one)."""
    starts, position = [], 1
    while position < len(messages):
        starts.append(position)
        position = exchange_end(messages, position)
    return starts


def _as_text(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        text = str(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            text += f" [call {function.get('name')}({function.get('arguments')})]"
        lines.append(f"{message['role']}: {text.strip()}")
    return "\n".join(lines)
