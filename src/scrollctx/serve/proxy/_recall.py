"""The recall loop: one client request, as many upstream calls as the model's recall needs.

Steps, once the request's new messages are logged (:mod:`._conversations`):

1. **Budget**: Algorithm 1 keeps the conversation's view under ``rho * C``
   (``WorkingView.ensure_budget``, with the kernel's namespace digest).
2. **Call**: the upstream gets the view in its wire format (the client's system prompt plus
   Scroll's rules, the eviction index message, the live tail, the digest), the client's tools
   and options unchanged, and ``recall_history_python``.
3. **Log**: the answer's assistant message is appended at once: hidden when the loop goes on,
   else as the client-visible reply, marked with the digest of exactly what the client gets.
4. **Recall**: each ``recall_history_python`` call runs as a cell in the conversation's
   sandboxed kernel (:func:`~scrollctx.agent.answer_call`, the agent's own tool and
   observation); its result is appended, hidden and out of full-text search.
5. **Repeat** from 1 while an answer called our tool alone. The budget of a request is
   ``max_steps`` calls and ``max_seconds`` seconds: the call made once it is spent is the
   *last* (``tool_choice`` none, so the model answers in text); recall calls in it get a
   "not run" result.
6. **Reply**: the client gets one assistant message: every answer's visible text (headline
   lines stripped) and reasoning, and the client's own tool calls; never our calls. Its
   ``usage`` is the sum over every call; the hidden steps are listed in ``scroll.recall``.
   A last answer that called none of our tools is logged once the client has it
   (:attr:`Outcome.settle`); should that write fail, the client's next request still carries
   the reply, and it is logged then.

Durability: the client's messages were committed before step 1, and their flush to disk
runs meanwhile; ``call`` waits for it before the upstream sees anything (they are what nothing
may lose). What the loop writes (index events, answers, recall results) is
committed at once, visible to every reader and safe from a killed proxy, but without a flush
of its own (``atomic(durable=False)``): it reaches the disk with the next request's flush (or
the OS's write-back), so the one flush on a request's path is its own messages'. Only an OS
crash or power loss in between can lose it, and what it loses is the model's side of that
request: the client's copy of the reply comes back with its next request.

An answer that calls our tool and the client's together ends the request: ours run at once
(their results follow the answer in the log), the client's go to the client, and its results
follow ours.

Invariants: every call of ours has its result logged before anything else is appended, so the
view keeps calls paired; a failure (the upstream's error, a cancelled stream) leaves logged
whatever was logged, and the client's retry continues from it; at most ``max_steps`` upstream
calls per request, and no step starts after ``max_seconds``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from scrollctx.agent import Observation, ToolContext, Toolset, answer_call
from scrollctx.agent.backends import Backend, ToolCall
from scrollctx.errors import UsageError
from scrollctx.serve.proxy._conversations import PROXY_KEY, Conversation, Conversations
from scrollctx.serve.proxy._wire import Answer, ClientRequest, Wire, sum_usage
from scrollctx.view import WorkingView

__all__ = ["RECALL_TOOL", "Call", "Outcome", "RecallLimits", "RecallLoop"]

RECALL_TOOL = "recall_history_python"
_SOURCE_SHOWN = 500

Call = Callable[[dict[str, Any], float | None], dict[str, Any]]
"""Sends one upstream body (with a timeout) and returns the answer JSON."""


@dataclass(frozen=True, slots=True)
class RecallLimits:
    """How far one request may go: upstream calls, seconds, and seconds per cell."""

    max_steps: int = 6
    max_seconds: float = 40.0
    cell_timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.max_steps < 1 or not self.max_seconds > 0 or not self.cell_timeout > 0:
            raise UsageError(
                "recall limits must be positive: max_steps >= 1, max_seconds and cell_timeout "
                f"> 0 (got {self.max_steps}, {self.max_seconds}, {self.cell_timeout})"
            )


@dataclass(slots=True)
class Outcome:
    """What one request produced: the answers, the client's reply, usage, hidden steps."""

    answers: list[Answer] = field(default_factory=list)
    reply: dict[str, Any] = field(default_factory=dict)
    usage: Any = None
    recall: list[dict[str, Any]] = field(default_factory=list)
    settle: Callable[[], None] | None = None
    """Logs the reply, when that was left until the client has it (call it before the
    conversation's next request: the caller still holds the lock)."""

    def extension(self, session_id: str) -> dict[str, Any]:
        """The ``scroll`` field of the reply."""
        return {"session_id": session_id, "recall_steps": len(self.recall), "recall": self.recall}


class RecallLoop:
    """Runs the loop of the module docstring for one door's wire and upstream.

    Args:
        backend: the upstream (its wire door: ``send``, ``read_answer``).
        wire: the format the client and the upstream speak.
        conversations: where the replies are recorded.
        recall: the toolset holding our ``recall_history_python``.
        context_of: the tool context (the kernel) of a conversation.
        limits: the budget of one request.
    """

    def __init__(
        self,
        backend: Backend,
        wire: Wire,
        conversations: Conversations,
        recall: Toolset,
        context_of: Callable[[Conversation], ToolContext],
        limits: RecallLimits,
    ) -> None:
        self.backend, self.wire, self.conversations = backend, wire, conversations
        self.recall, self.context_of, self.limits = recall, context_of, limits
        tool = recall.get(RECALL_TOOL)
        if tool is None:
            raise UsageError(f"the recall toolset has no {RECALL_TOOL} tool")
        self.spec = tool.spec()

    def run(
        self,
        conversation: Conversation,
        request: ClientRequest,
        call: Call,
        reply: Callable[[list[Answer]], dict[str, Any]] | None = None,
    ) -> Outcome:
        """Answer the request (its messages already logged); the caller holds the lock.

        ``call`` sends one upstream body; ``reply`` gives the message the client got for the
        answers (default: the wire's :meth:`~._wire.Wire.client_reply`; a stream knows what
        it sent).
        """
        reply_of = reply or (lambda answers: self.wire.client_reply(answers, RECALL_TOOL))
        view = self.conversations.view(conversation)
        context = self.context_of(conversation)
        started, outcome = time.monotonic(), Outcome()
        position = conversation.tip + 1
        while True:
            spent = time.monotonic() - started
            last = len(outcome.answers) + 1 >= self.limits.max_steps
            last = last or spent >= self.limits.max_seconds
            self._budget(view, context.digest)
            body = self.wire.upstream_body(request, view.build(self.wire.name), self.spec,
                                           last=last)  # fmt: skip
            began = time.monotonic()
            raw = call(body, None)
            answer = Answer(raw, self.wire.message_of(raw), self.backend.read_answer(raw))
            outcome.answers.append(answer)
            usage = answer.completion.usage
            if usage is not None and usage.prompt_tokens > 0:
                view.observe_usage(usage.prompt_tokens)
            ours = [c for c in answer.completion.tool_calls if c.name == RECALL_TOOL]
            done = last or not ours or len(ours) < len(answer.completion.tool_calls)
            elapsed = time.monotonic() - began
            if done:
                outcome.reply = reply_of(outcome.answers)
                outcome.usage = sum_usage([a.raw.get("usage") for a in outcome.answers])
            if done and not ours:  # the reply alone: logged once the client has it
                outcome.settle = functools.partial(
                    self._log_answer, conversation, outcome, answer, True, elapsed
                )
                return outcome
            self._log_answer(conversation, outcome, answer, done, elapsed)
            for tool_call in ours:
                seq = self._answer_call(conversation, context, tool_call, position, last, outcome)
                if done:
                    self.conversations.extend_tip(conversation, seq)
            if done:
                return outcome

    def _log_answer(
        self,
        conversation: Conversation,
        outcome: Outcome,
        answer: Answer,
        done: bool,
        elapsed: float,
    ) -> None:
        view = self.conversations.view(conversation)
        if done:
            marks = conversation.reply_marks(self.wire.fingerprint(outcome.reply))
        else:
            marks = conversation.hidden_marks()
        call_meta = {
            "model": answer.raw.get("model"),
            "usage": answer.raw.get("usage"),
            "elapsed_s": round(elapsed, 3),
        }
        fields = {"metadata": {PROXY_KEY: marks, "model_call": call_meta}}
        with self._unflushed():
            seq = view.append(answer.message, provider=self.wire.name, fields=fields)[-1]
        if done:
            self.conversations.record_reply(conversation, outcome.reply, marks["chain"], seq)

    def _answer_call(
        self,
        conversation: Conversation,
        context: ToolContext,
        tool_call: ToolCall,
        position: int,
        last: bool,
        outcome: Outcome,
    ) -> int:
        if last:
            observation = Observation(
                f"not run: this request's recall budget ({self.limits.max_steps} calls, "
                f"{self.limits.max_seconds:g} s) is spent; answer from what you have",
                ok=False,
            )
        else:
            observation, _ = answer_call(tool_call, self.recall, context)
        message = self.wire.result_message(tool_call.id, tool_call.name, observation.text,
                                           observation.ok)  # fmt: skip
        fields = {
            "metadata": {PROXY_KEY: {"at": position, "hidden": True}},
            "searchable": False,
            "tool_state": "ok" if observation.ok else "error",
        }
        view = self.conversations.view(conversation)
        with self._unflushed():
            seq = view.append(message, provider=self.wire.name, fields=fields)[-1]
        outcome.recall.append(_step(seq, tool_call, observation))
        return seq

    def _budget(self, view: WorkingView, digest: str) -> None:
        """Step 1, in a transaction of its own only when Algorithm 1 has something to write."""
        if digest:
            view.set_digest(digest)
        if view.tokens > view.target:
            with self._unflushed():
                view.ensure_budget()

    def _unflushed(self) -> AbstractContextManager[Any]:
        """A transaction for what the loop writes: committed now, flushed with the next
        request's messages (see the module docstring)."""
        return self.conversations.log.atomic(durable=False)


def _step(seq: int, call: ToolCall, observation: Observation) -> dict[str, Any]:
    source = call.arguments.get("source") if isinstance(call.arguments, Mapping) else None
    shown = str(source or call.raw_arguments)
    return {"seq": seq, "source": shown[:_SOURCE_SHOWN], "ok": observation.ok}
