"""Context policies: how a session's turns become the messages of each model call.

The loop talks to its context only through the :class:`ContextPolicy` protocol, so baselines
(summarization, retrieval, plain CodeAct, long context, an index-off ablation) are alternative
policies and the loop stays as it is. A policy must:

- ``add(message, synthetic=, fields=)``: append the OpenAI-style message to the Event Log (every
  turn is an event; ``fields`` carry lineage such as ``step_index``, ``run_id``, ``metadata``
  and ``searchable``) and keep it for later calls; return the new ``seq`` numbers. A tool call
  is always followed by one ``tool`` message per call id before anything else.
  :func:`persist_message` does the logging part for policies that keep their own structures.
- ``prepare(digest, shrink=)``: return the :class:`PreparedContext` of the next call (system
  text, messages, estimated tokens, what was evicted). ``shrink=True`` means the provider just
  rejected the input as too long: make the context clearly smaller than last time.
- ``observe_usage(prompt_tokens)``: the provider's count for the last prepared context.
- ``index_text()``: the eviction index as the model sees it ("" when the policy has none).

:class:`ScrollPolicy` is the default: Scroll's :class:`~scrollctx.view.WorkingView` with
eviction into the tiered headline index, restorable from the log after a restart. A new session
may start from a given index (``ScrollPolicy.open(..., initial_index=...)``: the paper's
protocol carries the ingestion index into each probe); the policy persists it as the session's
first ``eviction_index`` event, so a restart restores it like any other. ``index_header``
replaces the view's index header with one that names only the tools the model has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from scrollctx.agent.backends import Message
from scrollctx.errors import UsageError
from scrollctx.log import EventStore, NewEvent
from scrollctx.view import (
    INDEX_HEADER,
    INDEX_KIND,
    EvictionIndex,
    RenderedView,
    Turn,
    WorkingView,
    split_message,
)

__all__ = [
    "ContextPolicy",
    "PolicyFactory",
    "PolicyRequest",
    "PreparedContext",
    "ScrollPolicy",
    "persist_message",
]

_SHRINK = 0.7
_INTERRUPTED = "not run: the session was interrupted before this call returned"
_MIN_BUDGET = 1024


@dataclass(frozen=True, slots=True)
class PreparedContext:
    """The context of one model call."""

    system: str
    messages: list[Message]
    tokens: int
    tokens_before: int
    evicted_turns: int = 0
    index_seq: int | None = None
    index_header: str | None = None
    """The header the policy put on the index message instead of the view's own, if any."""
    budget_tokens: int | None = None
    """The window the policy kept the context under (``None``: the policy has none)."""

    @property
    def evicted(self) -> bool:
        """Whether the policy removed or folded anything for this call."""
        return self.evicted_turns > 0 or self.tokens < self.tokens_before


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """What a :data:`PolicyFactory` gets to open the context of one session."""

    log: EventStore
    session_id: str
    system_prompt: str
    budget_tokens: int
    event_fields: dict[str, Any]
    """Lineage written on every event of the session (``agent_id``...)."""
    initial_index: Mapping[str, Any] | None = None
    """The carried index of the conversation a question is about (``Agent.ask``), if any:
    a policy that shows an index opens a new session from it, others ignore it."""


@runtime_checkable
class ContextPolicy(Protocol):
    """The seam between the loop and context management (see the module docstring)."""

    def add(
        self,
        message: Message,
        *,
        synthetic: bool = False,
        fields: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """Log the message and keep it; return its seqs."""
        ...

    def prepare(self, digest: str, *, shrink: bool = False) -> PreparedContext:
        """Return the context of the next model call."""
        ...

    def observe_usage(self, prompt_tokens: int) -> None:
        """Take the provider's prompt-token count for the last prepared context."""
        ...

    def index_text(self) -> str:
        """Return the eviction index text ("" when there is none)."""
        ...


PolicyFactory = Callable[[PolicyRequest], ContextPolicy]
"""Builds a session's context policy from a :class:`PolicyRequest`."""


def persist_message(
    log: EventStore,
    session_id: str,
    message: Message,
    *,
    synthetic: bool = False,
    fields: Mapping[str, Any] | None = None,
) -> list[int]:
    """Append one message to the log as the working view would; return the seqs."""
    turns = split_message(dict(message), "openai", synthetic=synthetic)
    return log.append_many([turn.to_event(session_id, **dict(fields or {})) for turn in turns])


class ScrollPolicy:
    """The default policy: a :class:`WorkingView` (Algorithm 1, tiered headline index)."""

    def __init__(self, view: WorkingView, *, index_header: str | None = None) -> None:
        self.view = view
        self.index_header = index_header

    @classmethod
    def open(
        cls,
        log: EventStore,
        session_id: str,
        system_prompt: str,
        *,
        budget_tokens: int,
        rho: float = 0.8,
        k: int = 4,
        tail_groups: int = 2,
        keep_results: int = 3,
        event_fields: Mapping[str, Any] | None = None,
        initial_index: EvictionIndex | Mapping[str, Any] | None = None,
        index_header: str | None = None,
        with_index: bool = True,
    ) -> ScrollPolicy:
        """Open the session's view, restoring it from the log when the session has turns.

        ``initial_index`` (an index or its ``to_data`` form) seeds a session that has no
        events yet; a session that already has events keeps its own state and ignores it.
        ``with_index=False`` evicts without an index (the ablation; ``initial_index`` is not
        used).

        Raises:
            UsageError: ``initial_index`` is not an eviction index.
        """
        if with_index and initial_index is not None and not _has_events(log, session_id):
            _hand_over(log, session_id, initial_index, event_fields or {})
        view = WorkingView.restore(
            log,
            session_id,
            system_prompt,
            budget_tokens=budget_tokens,
            rho=rho,
            k=k,
            tail_groups=tail_groups,
            keep_results=keep_results,
            event_fields=dict(event_fields or {}),
            with_index=with_index,
        )
        return cls(view, index_header=index_header)

    def add(
        self,
        message: Message,
        *,
        synthetic: bool = False,
        fields: Mapping[str, Any] | None = None,
    ) -> list[int]:
        """Append to the view (which persists it now).

        A session restored after a crash may end with tool calls that never got results; a
        new non-result message first closes each with an "interrupted" result, so the history
        stays well formed (a call is always followed by its result).
        """
        if message["role"] != "tool":
            self._close_open_calls(fields)
        return self.view.append(dict(message), synthetic=synthetic, fields=dict(fields or {}))

    def _close_open_calls(self, fields: Mapping[str, Any] | None) -> None:
        answered = {t.tool_call_id for t in self.view.turns if t.role == "tool"}
        for turn in self.view.turns:
            for block in turn.blocks if turn.role == "assistant" else ():
                if block["type"] == "call" and block["id"] not in answered:
                    result: dict[str, Any] = {
                        "role": "tool",
                        "tool_call_id": block["id"],
                        "name": block.get("name"),
                        "content": _INTERRUPTED,
                    }
                    self.view.append(result, fields={**dict(fields or {}), "tool_state": "error"})

    def prepare(self, digest: str, *, shrink: bool = False) -> PreparedContext:
        """Evict to the budget (a lower one after a too-long rejection) and build the request."""
        view = self.view
        if shrink:
            view.budget_tokens = max(_MIN_BUDGET, int(view.tokens * _SHRINK))
        report = view.ensure_budget(digest or None)
        rendered, messages = self.request(digest)
        return PreparedContext(
            system=view.system_prompt,
            messages=messages,
            tokens=rendered.tokens,
            tokens_before=report.tokens_before,
            evicted_turns=report.evicted_turns,
            index_seq=report.index_seq,
            index_header=self.index_header,
            budget_tokens=view.budget_tokens,
        )

    def request(self, digest: str) -> tuple[RenderedView, list[Message]]:
        """Build the next call's messages from the view as it is (no eviction, nothing
        written): the body :meth:`prepare` hands the backend, the system prompt apart."""
        rendered = self.view.build("openai", digest or None)
        messages = list(rendered.messages)
        if messages and messages[0].get("role") == "system":
            messages = messages[1:]
        return rendered, [self._headed(_as_message(m)) for m in messages]

    def parts(self) -> list[tuple[str, Message, Turn | None]]:
        """The body of :meth:`request` part by part, before the OpenAI layout joins the index
        and the digest to the turns beside them (:meth:`WorkingView.openai_parts`)."""
        return [
            (kind, self._headed(_as_message(message)), turn)
            for kind, message, turn in self.view.openai_parts()
        ]

    def observe_usage(self, prompt_tokens: int) -> None:
        """Calibrate the view's token counter."""
        if prompt_tokens > 0:
            self.view.observe_usage(prompt_tokens)

    def index_text(self) -> str:
        """The view's eviction index message (with :attr:`index_header` when set)."""
        return self._header_swapped(self.view.index_text())

    def _headed(self, message: Message) -> Message:
        content = message.get("content")
        if self.index_header is None or not isinstance(content, str):
            return message
        swapped = self._header_swapped(content)
        return message if swapped is content else {**message, "content": swapped}

    def _header_swapped(self, text: str) -> str:
        if self.index_header is None or not text.startswith(INDEX_HEADER):
            return text
        return self.index_header + text[len(INDEX_HEADER) :]


def _has_events(log: EventStore, session_id: str) -> bool:
    rows = log.execute(
        "SELECT 1 FROM conversation_history WHERE session_id = ? LIMIT 1", (session_id,)
    )
    return bool(rows)


def _hand_over(
    log: EventStore,
    session_id: str,
    index: EvictionIndex | Mapping[str, Any],
    fields: Mapping[str, Any],
) -> int:
    """Persist ``index`` as the new session's first eviction index event; return its seq."""
    if isinstance(index, EvictionIndex):
        data = index.to_data({"live_from": log.last_seq() + 1, "pinned": [], "folded": []})
    else:
        data = dict(index)
        try:
            EvictionIndex.from_data(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise UsageError(
                f"initial_index is not an eviction index ({type(exc).__name__}: {exc}); pass "
                "an EvictionIndex or its to_data() form"
            ) from exc
        data.setdefault("view_state", {"live_from": log.last_seq() + 1, "pinned": [], "folded": []})
    data["session_id"] = session_id
    return log.append(
        NewEvent(
            session_id=session_id,
            kind=INDEX_KIND,
            role="system",
            content=f"eviction index carried over: {_block_count(data)} blocks",
            metadata=data,
            searchable=False,
            agent_id=fields.get("agent_id"),
            task_id=fields.get("task_id"),
        )
    )


def _block_count(data: Mapping[str, Any]) -> int:
    return sum(len(tier.get("blocks", [])) for tier in data.get("tiers", []))


def _as_message(rendered: dict[str, Any]) -> Message:
    # The view's cached dicts are read-only: hand the backend a shallow copy.
    return dict(rendered)  # type: ignore[return-value]
