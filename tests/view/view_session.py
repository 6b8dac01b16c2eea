"""Helpers for the view tests: a scripted session driver and the invariant checker."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from scrollctx.log import EventLog
from scrollctx.view import EvictionReport, WorkingView
from scrollctx.view._turns import VIEW_KEY

WORDS = "alpha beta gamma delta kappa lambda north south river stone 北京 東京 x=1; f(y)".split()


def text_of(size: int, salt: int) -> str:
    """Deterministic text of about ``size`` words."""
    return " ".join(WORDS[(salt * 7 + i * 3) % len(WORDS)] for i in range(max(1, size)))


@dataclass
class Session:
    """Drives a view with valid messages and remembers everything it appended."""

    view: WorkingView
    texts: dict[int, str] = field(default_factory=dict)
    counter: int = 0
    pending: list[Any] = field(default_factory=list)
    provider: str = "openai"

    def user(self, size: int, *, synthetic: bool = False) -> None:
        self._append({"role": "user", "content": text_of(size, self._next())}, synthetic)

    def tools(self, sizes: list[int], *, headline: bool = True) -> None:
        calls = [(f"call_{self._next()}", size) for size in sizes]
        line = "\n⟦ work | partial | continue | in_progress ⟧" if headline else ""
        text = f"Running {len(calls)} tool(s).{line}"
        outputs = [(call_id, text_of(size, self._next())) for call_id, size in calls]
        if self.provider == "anthropic":
            uses = [
                {"type": "tool_use", "id": call_id, "name": "repl_exec", "input": {"n": size}}
                for call_id, size in calls
            ]
            self._append({"role": "assistant", "content": [{"type": "text", "text": text}, *uses]})
            results = [
                {"type": "tool_result", "tool_use_id": call_id, "content": output}
                for call_id, output in outputs
            ]
            self._append({"role": "user", "content": results})
            return
        function_calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "repl_exec", "arguments": json.dumps({"n": size})},
            }
            for call_id, size in calls
        ]
        self._append({"role": "assistant", "content": text, "tool_calls": function_calls})
        for call_id, output in outputs:
            self._append({"role": "tool", "tool_call_id": call_id, "content": output})

    def reply(self, size: int, *, headline: bool = True) -> None:
        line = f"\n⟦ task {self.counter} | verified | next | done ⟧" if headline else ""
        self._append({"role": "assistant", "content": text_of(size, self._next()) + line})

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _append(self, message: dict[str, Any], synthetic: bool = False) -> None:
        for turn in self.view.add(message, provider=self.provider, synthetic=synthetic):
            self.pending.append(turn)

    def persist(self) -> None:
        self.view.persist()
        for turn in self.pending:
            self.texts[turn.seq] = turn.text
        self.pending.clear()


def view_seqs(log: EventLog, session_id: str) -> list[int]:
    return [e.seq for e in log.session_events(session_id) if VIEW_KEY in e.metadata]


def protected_start(view: WorkingView) -> int:
    """Index (in the live turns) from which nothing may leave, computed independently."""
    turns = view.turns
    starts = []
    position = 0
    while position < len(turns):
        end = position + 1
        while end < len(turns) and turns[end].role == "tool":
            end += 1
        starts.append(position)
        position = end
    cut = len(turns)
    if view.tail_groups:
        cut = min(cut, starts[-view.tail_groups] if len(starts) >= view.tail_groups else 0)
    tools = [i for i, t in enumerate(turns) if t.role == "tool"]
    if view.keep_results and tools:
        newest = tools[-view.keep_results] if len(tools) >= view.keep_results else tools[0]
        cut = min(cut, max(s for s in starts if s <= newest))
    return cut


def protected_seqs(view: WorkingView) -> set[int]:
    """The seqs of the live turns that must stay live and unfolded through the next eviction
    (the protected tail and newest results, by :func:`protected_start`)."""
    return {t.seq for t in view.turns[protected_start(view) :] if t.seq is not None}


def check_invariants(
    view: WorkingView,
    log: EventLog,
    session: Session,
    report: EvictionReport | None,
    *,
    overflowed: bool = False,
    protected: set[int] | None = None,
) -> None:
    """Assert every property the issue lists, for the view's current state.

    ``overflowed``: ensure_budget just raised ContextOverflow, which is only allowed once
    everything outside the protected part has left (or been folded where that saves tokens).
    ``protected``: :func:`protected_seqs` taken before that ensure_budget; each must still be
    live and whole.
    """
    turns = view.turns
    live = {t.seq for t in turns}
    for turn in turns:
        if protected and turn.seq in protected:
            assert not turn.folded, f"protected seq {turn.seq} was folded"
    assert not (protected or set()) - live, f"protected seqs left: {(protected or set()) - live}"
    all_seqs = view_seqs(log, view.session_id)
    # Every event ever appended is recoverable by seq, verbatim.
    for seq, text in session.texts.items():
        assert log.full_text(log.get(seq)) == text
    # Index spans: disjoint, ascending, covering exactly what left the view (+ pinned requests).
    spans = view.index.spans()
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    covered = {s for s in all_seqs if any(lo <= s <= hi for lo, hi in spans)}
    pinned = {t.seq for t in turns if t.pinned}
    assert covered == (set(all_seqs) - live) | pinned
    # O(k log_k n) blocks after n evictions.
    n, k = view.index.counters["evictions"], view.index.k
    if n > 1:
        assert view.index.block_count() <= (k - 1) * (math.ceil(math.log(n, k - 1)) + 1)
    # No tool call separated from its result.
    for position, turn in enumerate(turns):
        if turn.role == "tool":
            owner = next(t for t in reversed(turns[:position]) if t.role != "tool")
            assert turn.tool_call_id in owner.call_ids
        if turn.role == "assistant" and turn.call_ids:
            following = [
                t.tool_call_id for t in turns[position + 1 : position + 1 + len(turn.call_ids)]
            ]
            assert following == turn.call_ids
    # The active (latest real) user request is live.
    real = [
        s
        for s in all_seqs
        if log.get(s).metadata[VIEW_KEY]["role"] == "user"
        and not log.get(s).metadata[VIEW_KEY]["synthetic"]
    ]
    if real:
        assert real[-1] in live
    # Within budget, or only the protected part is left.
    if (report is not None and view.tokens > view.target) or overflowed:
        cut = protected_start(view)
        request = next((i for i in range(len(turns) - 1, -1, -1) if turns[i].is_real_user), None)
        leftover = [t for i, t in enumerate(turns) if i < cut and i != request and not t.pinned]
        assert leftover == []
        assert overflowed or view.tokens <= view.budget_tokens
    if overflowed:
        assert view.tokens > view.budget_tokens


def check_provider_messages(view: WorkingView) -> None:
    """Assert the built requests are valid for both providers (pairing, roles, first message)."""
    openai = view.render("openai")
    pending: list[str] = []
    for message in openai:
        if message["role"] == "tool":
            assert message["tool_call_id"] == pending.pop(0)
            continue
        assert pending == [], "a tool call lost its result"
        pending = [c["id"] for c in message.get("tool_calls") or []]
    assert pending == [] or openai[-1]["role"] == "assistant"
    # Strict chat templates: no two user messages in a row, nor a user message right after a
    # tool result unless it is a real request (the index and the digest never stand alone).
    body = [m for m in openai if m["role"] != "system"]
    for before, after in zip(body, body[1:], strict=False):
        assert not (before["role"] == "user" and after["role"] == "user"), "two user messages"
    if view.digest:
        assert "[namespace digest]" in str(body[-1]["content"]) and body[-1]["role"] != "assistant"
    anthropic = view.render("anthropic")
    assert anthropic and anthropic[0]["role"] == "user"
    for before, after in zip(anthropic, anthropic[1:], strict=False):
        assert before["role"] != after["role"], "Anthropic roles must alternate"
        if before["role"] == "assistant" and isinstance(before["content"], list):
            uses = [b["id"] for b in before["content"] if b.get("type") == "tool_use"]
            blocks = after["content"] if isinstance(after["content"], list) else []
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            assert results[: len(uses)] == uses
