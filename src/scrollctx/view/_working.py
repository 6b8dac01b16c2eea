"""The working view of one agent session, and eviction (the paper's Algorithm 1).

The view is the system prompt, the eviction index message, the live turns and the namespace
digest, rendered for a provider (for OpenAI-compatible servers the index opens the first user
message and the digest closes the last one, so roles alternate: :func:`openai_layout`). It is
bounded: :meth:`WorkingView.ensure_budget` runs Algorithm 1 whenever the view exceeds
``rho * budget_tokens``:

1. **Persist** every live turn that is not yet in the Event Log, in the transaction that
   writes the first index event of step 5 (one commit per model step). If that fails nothing
   is evicted (a turn that is not durable is never dropped).
2. **Protected**: the active turn (from the latest real user request), the recent tail, the
   newest tool results (see :mod:`scrollctx.view._eviction`).
3. **FoldPayloads**: completed tool outputs outside the protected part become ``seq`` pointer
   stubs, each only if its stub is smaller.
4. **SelectSpan**: the oldest completed groups, whole, until the view fits.
5. **EvictToIndex** and **RollUp**: the span's lines enter tier 0 of the index; full tiers roll
   up. The new index is written to the log as an ``eviction_index`` event (searchable=False)
   *before* the view changes; if that write fails, the view is left as it was. Blocks an
   earlier index event of the session already holds are stored by reference
   (:mod:`scrollctx.view._stored`), so each event describes the whole index at a small cost.

``with_index=False`` is the paper's "Scroll w/o index" ablation: the same steps 1-4, but the
evicted span enters no index. Nothing is rendered in its place and no ``eviction_index`` event
is written; the view's restore state goes to a ``view_state`` event instead, whose index data
keeps the evicted spans without any text (so ``ms.index()``, SQL and the view show no map of
the past, and a restart still knows what was evicted).

Only if the view is still over budget does a second pass fold and evict inside the active
turn, keeping the request itself live ("pinned"). If even then the view exceeds
``budget_tokens`` (the window), :class:`~scrollctx.errors.ContextOverflow` is raised.

Token counts are calibrated by the prompt tokens the endpoint reports; once calibrated, every
view event the view writes carries the calibration (``metadata.token_calibration``) and
:meth:`WorkingView.restore` takes back the latest, so a restart does not count (and evict) as
an uncalibrated view would.

Invariants: every turn that ever entered the view is recoverable from the log by ``seq``;
a tool call never leaves the view without its results (they are added right after it, and
groups leave whole); the active request never leaves; the view state is a function of the
log, so :meth:`WorkingView.restore` over the same file rebuilds the same view and index.
Token counts are kept incrementally (each turn counted once), so building a view costs time
proportional to the live turns only, not to the session's history.

Message dicts returned by :meth:`WorkingView.build` are cached per turn: treat them as read-only.
"""

from __future__ import annotations

import json
import logging
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from scrollctx.errors import ContextOverflow, IntegrityError, StoreError, UsageError
from scrollctx.log import Event, EventStore, Kind, NewEvent
from scrollctx.view._eviction import (
    Group,
    active_start,
    build_block,
    fold_stub,
    group_turns,
    protected_suffix,
)
from scrollctx.view._index import INDEX_HEADER, EvictionIndex, IndexBlock, IndexLine
from scrollctx.view._render import (
    merge_anthropic,
    openai_layout,
    to_anthropic,
    to_openai,
    user_text,
)
from scrollctx.view._reports import CallSnapshot, EvictionReport, RenderedView, ViewMetrics
from scrollctx.view._stored import Locations, pack, stored_locations, unpack
from scrollctx.view._turns import PROVIDERS, VIEW_KEY, Turn, split_message, turn_from_event
from scrollctx.view.tokens import MESSAGE_OVERHEAD, TokenCounter

__all__ = [
    "CALIBRATION_KEY",
    "DIGEST_HEADER",
    "INDEX_KIND",
    "STATE_KIND",
    "WorkingView",
    "call_seqs",
    "index_events",
    "live_seqs",
    "load_index",
]

INDEX_KIND = "eviction_index"
"""Event kind of the persisted index (``metadata``: :meth:`EvictionIndex.to_data`, packed)."""

CALIBRATION_KEY = "token_calibration"
"""Metadata key of the counter's calibration on the view events written after it learned."""

STATE_KIND = "view_state"
"""Event kind of a view without an index: the evicted spans (no text) and the restore state."""

DIGEST_HEADER = (
    "[namespace digest] Variables resident in your kernel (this is state, not a user message):\n"
)
_PLACEHOLDER = "[session continues]"
_MAX_ROUNDS = 16
_PAGE_SEQS = 2000
_NO_STATE: dict[str, Any] = {"live_from": 1, "pinned": [], "folded": []}
_log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Plan:
    folds: list[Turn] = field(default_factory=list)
    drops: list[Turn] = field(default_factory=list)
    pin: Turn | None = None
    block: IndexBlock | None = None
    index: EvictionIndex | None = None
    rollups: int = 0


class WorkingView:
    """The bounded working view of one session over an Event Log.

    Example::

        view = WorkingView(log, "s1", system_prompt, budget_tokens=32_000)
        view.append({"role": "user", "content": "Plan the trip"})
        report = view.ensure_budget(digest=kernel_digest)
        request = view.build("openai")          # request.messages -> chat.completions
        view.observe_usage(response.usage.prompt_tokens)

    Args:
        log: the Event Log the turns are (or get) persisted in.
        session_id: the session whose turns this view holds.
        system_prompt: sent as the system message (OpenAI) or ``system`` (Anthropic).
        budget_tokens: the window ``C``; eviction starts above ``rho * C``.
        rho: the eviction trigger as a share of ``C`` (0 < rho <= 1).
        evict_to: evict down to this share of ``C`` (0 < evict_to <= rho) instead of just
            under ``rho * C``. ``None`` is Algorithm 1 exactly; a lower value evicts more at
            once and less often, so provider prompt caches survive more calls.
        k: index tier width (>= 3).
        counter: token counter (default: the calibrated estimate).
        tail_groups: how many of the newest groups are protected.
        keep_results: how many of the newest tool results are protected.
        event_fields: lineage written on every event this view appends (agent_id, run_id…).
        with_index: evicted spans enter the eviction index (Algorithm 1); False evicts the
            same way and keeps no index (see the module docstring).
    """

    def __init__(
        self,
        log: EventStore,
        session_id: str,
        system_prompt: str = "",
        *,
        budget_tokens: int,
        rho: float = 0.8,
        evict_to: float | None = None,
        k: int = 4,
        counter: TokenCounter | None = None,
        tail_groups: int = 2,
        keep_results: int = 3,
        event_fields: dict[str, Any] | None = None,
        with_index: bool = True,
    ) -> None:
        _check_settings(session_id, budget_tokens, rho, k, tail_groups, keep_results)
        if evict_to is not None and not 0 < evict_to <= rho:
            raise UsageError(f"evict_to must be in (0, rho={rho}], got {evict_to}")
        self.log = log
        self.session_id = session_id
        self.system_prompt = system_prompt
        self.budget_tokens = budget_tokens
        self.rho = rho
        self.evict_to = evict_to
        self.tail_groups = tail_groups
        self.keep_results = keep_results
        self.counter = counter or TokenCounter()
        self.event_fields = dict(event_fields or {})
        self.with_index = with_index
        self.index = EvictionIndex(k, session_id)
        self.metrics = ViewMetrics()
        self._stored: Locations = {}
        self._turns: list[Turn] = []
        self._open_calls: set[str] = set()
        self._turns_raw = 0
        self._system_raw = self._message_raw(system_prompt)
        self._index_text = ""
        self._index_raw = 0
        self._digest = ""
        self._digest_raw = 0
        self._last_raw_total = 0

    # -- adding turns ----------------------------------------------------------------------

    def add(
        self,
        message: dict[str, Any],
        *,
        provider: str = "openai",
        seq: int | list[int] | None = None,
        synthetic: bool = False,
        fields: dict[str, Any] | None = None,
    ) -> list[Turn]:
        """Add a provider message as live turn(s).

        Pass ``seq`` (one per turn the message splits into) when the caller already appended
        the events (built with :meth:`Turn.to_event` from :func:`split_message`); without it
        the turns are persisted by :meth:`persist` or by the next :meth:`ensure_budget`, with
        ``fields`` (step_index, msg_index…) added to their events. ``synthetic`` marks a user
        message the harness wrote (a nudge), which never counts as the active request.

        Raises:
            UsageError: bad message, a tool result without its call, a non-result while calls
                await results, or seqs that are missing, out of order, mixed with pending
                turns, or not view events of this session.
        """
        turns = split_message(message, provider, synthetic=synthetic)
        seqs = [seq] if isinstance(seq, int) else seq
        self._check_seqs(turns, seqs)
        open_calls = set(self._open_calls)
        for turn in turns:
            _check_pairing(turn, open_calls)
        for position, turn in enumerate(turns):
            turn.seq = seqs[position] if seqs is not None else None
            turn.fields = dict(fields or {})
            self._push(turn)
        return turns

    def append(
        self,
        message: dict[str, Any],
        *,
        provider: str = "openai",
        synthetic: bool = False,
        fields: dict[str, Any] | None = None,
    ) -> list[int]:
        """Add a message and persist it now (with pending turns before it); return its seqs."""
        turns = self.add(message, provider=provider, synthetic=synthetic, fields=fields)
        self.persist()
        return [turn.seq for turn in turns if turn.seq is not None]

    def persist(self) -> list[int]:
        """Write every pending turn to the log in one transaction; return their new seqs."""
        pending = [turn for turn in self._turns if turn.seq is None]
        if not pending:
            return []
        events = [self._event(turn) for turn in pending]
        seqs = self.log.append_many(events)
        for turn, seq in zip(pending, seqs, strict=True):
            turn.seq = seq
        return seqs

    def _event(self, turn: Turn) -> NewEvent:
        fields = {**self.event_fields, **turn.fields}
        if self.counter.samples:  # the learned calibration survives a restart (see restore)
            metadata = dict(fields.get("metadata") or {})
            fields["metadata"] = {**metadata, CALIBRATION_KEY: self.counter.state()}
        return turn.to_event(self.session_id, **fields)

    def _check_seqs(self, turns: list[Turn], seqs: list[int] | None) -> None:
        if seqs is None:
            return
        if len(seqs) != len(turns):
            raise UsageError(
                f"the message splits into {len(turns)} turn(s) but got {len(seqs)} seq(s)"
            )
        if any(t.seq is None for t in self._turns):
            raise UsageError("pending turns exist; call persist() before adding persisted turns")
        last = self._turns[-1].seq if self._turns else 0
        if sorted(seqs) != seqs or seqs[0] <= (last or 0) or len(set(seqs)) != len(seqs):
            raise UsageError(f"seqs {seqs} must ascend after the view's last seq {last}")
        found = {e.seq: e for e in self.log.events(seqs)}
        for seq in seqs:
            event = found.get(seq)
            if (
                event is None
                or event.session_id != self.session_id
                or VIEW_KEY not in event.metadata
            ):
                raise UsageError(
                    f"seq {seq} is not a view event of session {self.session_id!r}; append "
                    "the event built by Turn.to_event first, or add the message without seq"
                )

    def _push(self, turn: Turn) -> None:
        if turn.folded:  # restored folded: only its stub is ever sent again, count only that
            turn.raw_tokens = turn.stub_tokens
        else:
            turn.raw_tokens = self._message_raw(turn.text) + self.counter.raw(turn.structure_text())
        if turn.role == "assistant":
            self._open_calls |= set(turn.call_ids)
            self.metrics.assistant_turns += 1
            self.metrics.headlined_turns += 1 if turn.headline else 0
        elif turn.role == "tool":
            self._open_calls.discard(turn.tool_call_id or "")
        self._turns.append(turn)
        self._turns_raw += turn.tokens

    # -- size ------------------------------------------------------------------------------

    @property
    def turns(self) -> list[Turn]:
        """The live turns, oldest first (read-only)."""
        return list(self._turns)

    @property
    def target(self) -> int:
        """``rho * budget_tokens``: eviction runs when the view is above this."""
        return int(self.rho * self.budget_tokens)

    @property
    def tokens(self) -> int:
        """The view's size in (calibrated) tokens, digest included."""
        return self.counter.scale(self._raw_total())

    def part_tokens(self) -> dict[str, int]:
        """The view's size by part (calibrated tokens): ``system``, ``index``, ``turns``,
        ``digest``; they add up to :attr:`tokens` up to rounding."""
        scale = self.counter.scale
        return {
            "system": scale(self._system_raw),
            "index": scale(self._index_raw),
            "turns": scale(self._turns_raw),
            "digest": scale(self._digest_raw),
        }

    def scaffold_raw(self) -> int:
        """Raw tokens of the system prompt and digest messages (what full replay also sends)."""
        return self._system_raw + self._digest_raw

    def _raw_total(self) -> int:
        return self._system_raw + self._index_raw + self._digest_raw + self._turns_raw

    def _message_raw(self, text: str) -> int:
        return self.counter.raw(text) + MESSAGE_OVERHEAD if text else 0

    @property
    def digest(self) -> str:
        """The namespace digest last given (it is per call and not persisted)."""
        return self._digest

    def set_digest(self, digest: str) -> None:
        """Set the namespace digest (plain text from the kernel) shown at the end of the view."""
        if digest != self._digest:
            self._digest = digest
            self._digest_raw = self._message_raw(DIGEST_HEADER + digest) if digest else 0

    def observe_usage(self, prompt_tokens: int) -> float:
        """Calibrate the counter with the prompt tokens the endpoint reported for the last build."""
        return self.counter.observe(raw_tokens=self._last_raw_total, reported_tokens=prompt_tokens)

    # -- rendering -------------------------------------------------------------------------

    def index_text(self) -> str:
        """Return the index message text exactly as the model receives it ("" before eviction)."""
        return self._index_text

    def index_data(self) -> dict[str, Any]:
        """Return the index as data (the shape ``ms.index()`` returns)."""
        data = self.index.to_data(self._view_state(self._turns, self.index))
        data["counters"].update(self._counters(_Plan()))
        return data

    def build(self, provider: str = "openai", digest: str | None = None) -> RenderedView:
        """Build the request for one model call and record it in :attr:`metrics`."""
        started = time.perf_counter()
        if provider not in PROVIDERS:
            raise UsageError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
        if digest is not None:
            self.set_digest(digest)
        turns = [turn.cache.get(provider) or self._rendered(turn, provider) for turn in self._turns]
        digest = DIGEST_HEADER + self._digest if self._digest else ""
        if provider == "anthropic":
            body = [to_anthropic(user_text(self._index_text))] if self._index_text else []
            body += turns
            if digest:
                body.append(to_anthropic(user_text(digest)))
            messages = _anthropic_body(body)
        else:
            messages = openai_layout(turns, self._index_text, digest)
            if self.system_prompt:
                messages = [{"role": "system", "content": self.system_prompt}, *messages]
        self._last_raw_total = self._raw_total()
        tokens = self.tokens
        elapsed = (time.perf_counter() - started) * 1000
        self._record_call(tokens, elapsed)
        return RenderedView(provider, self.system_prompt, messages, tokens, elapsed)

    def openai_parts(self) -> list[tuple[str, dict[str, Any], Turn | None]]:
        """The OpenAI body part by part, before :func:`openai_layout` joins them:
        ``("index", message, None)``, ``("turn", message, turn)`` for each live turn, and
        ``("digest", message, None)`` (for inspectors; nothing is recorded)."""
        parts: list[tuple[str, dict[str, Any], Turn | None]] = []
        if self._index_text:
            parts.append(("index", {"role": "user", "content": self._index_text}, None))
        parts += [("turn", self._rendered(turn, "openai"), turn) for turn in self._turns]
        if self._digest:
            parts.append(
                ("digest", {"role": "user", "content": DIGEST_HEADER + self._digest}, None)
            )
        return parts

    def render(self, provider: str = "openai", digest: str | None = None) -> list[dict[str, Any]]:
        """Return the messages of :meth:`build` (for Anthropic, ``system`` is not among them)."""
        return self.build(provider, digest).messages

    def _rendered(self, turn: Turn, provider: str) -> dict[str, Any]:
        cached = turn.cache.get(provider)
        if cached is None:
            stub = fold_stub(turn) if turn.folded else None
            cached = (to_openai if provider == "openai" else to_anthropic)(turn, stub)
            turn.cache[provider] = cached
        return cached

    def _record_call(self, tokens: int, elapsed_ms: float) -> None:
        metrics = self.metrics
        metrics.calls += 1
        metrics.call_tokens.append(tokens)
        metrics.last_build_ms = elapsed_ms
        metrics.max_view_tokens = max(metrics.max_view_tokens, tokens)
        metrics.total_input_tokens += tokens

    # -- eviction --------------------------------------------------------------------------

    def ensure_budget(self, digest: str | None = None) -> EvictionReport:
        """Run Algorithm 1 if the view exceeds ``rho * budget_tokens``; report what it did.

        Raises:
            ContextOverflow: the view still exceeds ``budget_tokens`` after every fold and
                eviction allowed (or persisting failed while it was over the window).
            StoreError: writing the index event failed (the view is left unchanged).
        """
        if digest is not None:
            self.set_digest(digest)
        report = EvictionReport(self.tokens, self.tokens, self.target)
        if report.tokens_before <= self.target:
            return report
        plan = self._persist_and_index(report)
        if plan is None:
            return report
        for round_ in range(_MAX_ROUNDS):
            if round_:
                plan = self._plan_and_index(report)
            if not (plan.folds or plan.drops):
                break
            self._apply(plan, report)
            if self.tokens <= self.target:
                break
        report.tokens_after = self.tokens
        self.metrics.tokens_before, self.metrics.tokens_after = report.tokens_before, self.tokens
        self._raise_if_overflow(None)
        return report

    evict_if_needed = ensure_budget

    def _persist_and_index(self, report: EvictionReport) -> _Plan | None:
        """Persist the pending turns and write the first round's index event in one commit
        (one fsync per model step, not two); return that round's plan, not yet applied.

        If persisting fails, nothing was written, the turns stay pending, nothing is evicted
        and None is returned (``report.persist_error`` says why). If only the index write
        fails, the turns are committed and its :class:`StoreError` is raised after the commit,
        as when each had a transaction of its own.
        """
        pending = [turn for turn in self._turns if turn.seq is None]
        if not pending:
            return self._plan_and_index(report)
        stored = self._stored
        index_failure: StoreError | None = None
        try:
            with self.log.atomic():
                self.persist()
                try:
                    with self.log.atomic():  # a savepoint: its failure keeps the turns
                        plan = self._plan_and_index(report)
                except StoreError as exc:
                    index_failure = exc
        except BaseException as exc:
            for turn in pending:  # rolled back: the seqs persist handed out do not exist
                turn.seq = None
            self._stored, report.index_seq = stored, None
            if not isinstance(exc, StoreError):
                raise
            report.persist_error = str(exc)
            _log.warning("not evicting: persisting live turns failed: %s", exc)
            self._raise_if_overflow(exc)
            return None
        if index_failure is not None:
            raise index_failure
        return plan

    def _plan_and_index(self, report: EvictionReport) -> _Plan:
        """Plan one round and write its index event if it changes anything (not applied)."""
        plan = self._plan()
        if plan.folds or plan.drops:
            report.index_seq = self._write_index(plan)
        return plan

    def _raise_if_overflow(self, cause: BaseException | None) -> None:
        tokens = self.tokens
        if tokens <= self.budget_tokens:
            return
        message = (
            f"the working view needs {tokens} tokens but the window is {self.budget_tokens}: "
            f"the part eviction may not touch (the active request, the last {self.tail_groups} "
            f"groups, the newest {self.keep_results} tool results, the index, the system prompt "
            "and the digest) is already larger; raise budget_tokens, lower keep_results or "
            "tail_groups, or have tools print less"
        )
        raise ContextOverflow(message, tokens=tokens, budget=self.budget_tokens) from cause

    def _plan(self) -> _Plan:
        turns = self._turns
        groups = group_turns(turns)
        start = active_start(turns)
        request = next((p for p, g in enumerate(groups) if g.start == start), len(groups))
        suffix = protected_suffix(
            turns, groups, tail_groups=self.tail_groups, keep_results=self.keep_results
        )
        low = self.target if self.evict_to is None else int(self.evict_to * self.budget_tokens)
        excess = self._raw_total() - self.counter.fitting(low)
        plan = _Plan()
        before = groups[: min(request, suffix)]
        excess -= self._plan_folds(plan, before)
        if excess > 0:
            self._plan_span(plan, before, excess, request=None)
        if excess <= 0 or plan.drops or request >= suffix:
            return plan
        if not all(t.pinned for t in turns[:start]):
            return plan
        inside = groups[request + 1 : suffix]
        excess -= self._plan_folds(plan, inside)
        if excess > 0:
            self._plan_span(plan, inside, excess, turns[start])
        return plan

    def _plan_folds(self, plan: _Plan, groups: list[Group]) -> int:
        saved = 0
        for group in groups:
            for turn in self._turns[group.start : group.end]:
                if turn.role != "tool" or turn.folded or turn.seq is None:
                    continue
                stub_raw = self._message_raw(fold_stub(turn))
                if stub_raw < turn.raw_tokens:
                    turn.stub_tokens = stub_raw
                    plan.folds.append(turn)
                    saved += turn.raw_tokens - stub_raw
        return saved

    def _plan_span(
        self, plan: _Plan, region: list[Group], excess: int, request: Turn | None
    ) -> None:
        folded = {id(t) for t in plan.folds}

        # Before the active turn the unit is a whole exchange (a request and its answers); a
        # region cut short by protected results may end mid-exchange only if it must.
        # Asked only where needed: a plan usually stops after a few groups of a long region.
        def ends(position: int) -> bool:
            return request is not None or self._ends_exchange(region[position])

        last_end = next((i for i in range(len(region) - 1, -1, -1) if ends(i)), -1)
        chosen: list[Group] = []
        removed = cost = 0
        for position, group in enumerate(region):
            members = self._turns[group.start : group.end]
            removed += sum(t.stub_tokens if id(t) in folded else t.tokens for t in members)
            if not all(t.pinned for t in members):
                chosen.append(group)
            plan.drops += members
            if removed - cost < excess or not (position > last_end or ends(position)):
                continue
            # A block only grows with its span: its last cost bounds the next from below, so
            # it is rendered again only once the savings could pay for it (rendering it for
            # every group made the first plan of a long conversation quadratic).
            cost = self._block_cost(chosen, request)
            if removed - cost >= excess:
                break
        if not chosen:
            return
        evicted = sum(g.end - g.start for g in chosen)
        if request is not None and not request.pinned:
            chosen.insert(
                0, Group(self._turns.index(request), self._turns.index(request) + 1, True)
            )
            plan.pin = request
        plan.block = build_block(self._turns, chosen)
        if not self.with_index:  # only the spans, for restore
            plan.block = IndexBlock(
                [IndexLine(line.lo, line.hi, line.kind, "") for line in plan.block.lines]
            )
        plan.index = self.index.copy()
        plan.rollups = plan.index.add(plan.block, evicted)

    def _ends_exchange(self, group: Group) -> bool:
        return group.end >= len(self._turns) or self._turns[group.end].is_real_user

    def _block_cost(self, chosen: list[Group], request: Turn | None) -> int:
        if not chosen:
            return 0
        groups = list(chosen)
        if request is not None and not request.pinned:
            at = self._turns.index(request)
            groups.insert(0, Group(at, at + 1, True))
        if not self.with_index:
            return 0
        text = build_block(self._turns, groups).render()
        base = 0 if self._index_text else self._message_raw(INDEX_HEADER) + 8
        return self.counter.raw(text) + 1 + base

    def _write_index(self, plan: _Plan) -> int:
        index = plan.index or self.index
        dropped = {id(t) for t in plan.drops}
        remaining = [t for t in self._turns if id(t) not in dropped]
        state = self._view_state(remaining, index, extra_folds=plan.folds, extra_pin=plan.pin)
        data = index.to_data(state)
        data["counters"].update(self._counters(plan))
        packed = pack(data, self._stored)
        span = f"; newest span seq {plan.block.lo}-{plan.block.hi}" if plan.block else ""
        what = "eviction index" if self.with_index else "view state"
        event = NewEvent(
            session_id=self.session_id,
            kind=INDEX_KIND if self.with_index else STATE_KIND,
            role="system",
            content=f"{what}: {index.counters['evictions']} evictions, "
            f"{index.block_count()} blocks{span}",
            metadata=packed,
            searchable=False,
            **self.event_fields,
        )
        seq = self.log.append(event)
        self._stored = stored_locations(packed, seq, self._stored)
        return seq

    def _counters(self, plan: _Plan) -> dict[str, int]:
        return {
            "folds": self.metrics.folds + len(plan.folds),
            "assistant_turns": self.metrics.assistant_turns,
            "headlined_turns": self.metrics.headlined_turns,
            "evicted_turns": self.metrics.evicted_turns + len(plan.drops),
        }

    def _view_state(
        self,
        turns: list[Turn],
        index: EvictionIndex,
        extra_folds: list[Turn] | None = None,
        extra_pin: Turn | None = None,
    ) -> dict[str, Any]:
        folding = {id(t) for t in extra_folds or []}
        live = [t.seq for t in turns if t.seq is not None]
        floor = max((b.hi for b in index.blocks()), default=0)
        return {
            "live_from": min(live) if live else floor + 1,
            "pinned": [t.seq for t in turns if t.pinned or t is extra_pin],
            "folded": [t.seq for t in turns if t.folded or id(t) in folding],
        }

    def _apply(self, plan: _Plan, report: EvictionReport) -> None:
        for turn in plan.folds:
            self._turns_raw -= turn.raw_tokens - turn.stub_tokens
            turn.folded = True
            turn.cache.clear()
            report.folded.append(turn.seq or 0)
        dropped = {id(t) for t in plan.drops}
        self._turns_raw -= sum(t.tokens for t in plan.drops)
        self._turns = [t for t in self._turns if id(t) not in dropped]
        if plan.pin is not None:
            plan.pin.pinned = True
        self.metrics.folds += len(plan.folds)
        if plan.index is not None and plan.block is not None:
            self.index = plan.index
            if self.with_index:
                self._set_index_text(self.index.render())
            report.evicted.append((plan.block.lo, plan.block.hi))
            report.rollups += plan.rollups
            self.metrics.evictions += 1
            self.metrics.rollups += plan.rollups
        report.evicted_turns += len(plan.drops)
        self.metrics.evicted_turns += len(plan.drops)

    def _set_index_text(self, text: str) -> None:
        self._index_text = text
        self._index_raw = self._message_raw(text)

    # -- restore ---------------------------------------------------------------------------

    @classmethod
    def restore(
        cls,
        log: EventStore,
        session_id: str,
        system_prompt: str = "",
        *,
        before_seq: int | None = None,
        **settings: Any,
    ) -> WorkingView:
        """Rebuild a session's view and index from the log (after a restart).

        ``before_seq`` rebuilds the view as it stood before that seq was written, from the
        events before it only: with the seq of an assistant turn, the view of the model call
        that turn answers (what :meth:`build` sent, but the digest, which is not logged).
        ``settings`` are the constructor's keyword arguments; ``k`` comes from the stored index
        when there is one.
        """
        kind = INDEX_KIND if settings.get("with_index", True) else STATE_KIND
        latest = _latest_index_event(log, session_id, kind, before_seq)
        state = _NO_STATE
        try:
            if latest is not None:
                settings["k"] = int(latest.metadata["k"])
            view = cls(log, session_id, system_prompt, **settings)
            if latest is not None:
                state = view._load_index(latest, view._index_metadata)
            view._restore_turns(
                state, after_index=latest.seq if latest else 0, before_seq=before_seq
            )
            view._restore_calibration(before_seq)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _malformed(log, session_id, latest, exc) from exc
        return view

    @classmethod
    def replay(
        cls,
        log: EventStore,
        session_id: str,
        system_prompt: str = "",
        *,
        digest_of: Callable[[Event], str | None] | None = None,
        **settings: Any,
    ) -> Iterator[CallSnapshot]:
        """Walk a session from its first event; yield the view each model call received.

        One pass in seq order through the same steps as :meth:`restore` (each index event's
        state decides which turns stay live, pinned and folded), yielding a
        :class:`CallSnapshot` before every assistant turn (the response of one call): the same
        view ``restore(before_seq=that turn's seq)`` rebuilds. ``digest_of(event)`` gives the
        digest that call carried (it is not a view event; ``None``: none).
        """
        view = cls(log, session_id, system_prompt, **settings)
        kind = INDEX_KIND if view.with_index else STATE_KIND
        seen: dict[int, dict[str, Any]] = {}
        history_raw = 0
        for event in _session_pages(log, session_id):
            if event.kind == kind:
                try:
                    state = view._load_index(event, seen.get)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    raise _malformed(log, session_id, event, exc) from exc
                seen[event.seq] = event.metadata
                view._keep_live(state)
            elif VIEW_KEY in event.metadata:
                turn = turn_from_event(event, log.full_text(event))
                if turn.role == "assistant":
                    view.set_digest((digest_of(event) if digest_of else None) or "")
                    yield view._snapshot(event.seq, history_raw)
                view._push(turn)
                history_raw += turn.raw_tokens
                calibration = event.metadata.get(CALIBRATION_KEY)
                if isinstance(calibration, dict):  # as the live view counted at that call
                    view.counter.restore(calibration)

    def _snapshot(self, seq: int, history_raw: int) -> CallSnapshot:
        metrics = self.metrics
        return CallSnapshot(
            seq=seq,
            tokens=self.tokens,
            history_tokens=self.counter.scale(self.scaffold_raw() + history_raw),
            index_tokens=self.counter.scale(self._index_raw),
            live_turns=len(self._turns),
            evictions=metrics.evictions,
            folds=metrics.folds,
            rollups=metrics.rollups,
        )

    def _load_index(
        self, event: Event, load: Callable[[int], dict[str, Any] | None]
    ) -> dict[str, Any]:
        """Take the index, counters and stored-block locations of an index event; return its
        view state (``live_from``, ``pinned``, ``folded``)."""
        data, self._stored = unpack(event.metadata, event.seq, load)
        self.index = EvictionIndex.from_data(data)
        if self.with_index:
            self._set_index_text(self.index.render())
        self._restore_metrics(data["counters"])
        state: dict[str, Any] = data.get("view_state", _NO_STATE)
        return state

    def _restore_calibration(self, before_seq: int | None) -> None:
        """Take back the latest calibration a view event of the session carries."""
        rows = self.log.execute(
            "SELECT json_extract(metadata, ?) AS state FROM conversation_history "
            "WHERE session_id = ? AND seq < ? AND json_extract(metadata, ?) IS NOT NULL "
            "ORDER BY seq DESC LIMIT 1",
            (
                f"$.{CALIBRATION_KEY}",
                self.session_id,
                before_seq if before_seq is not None else self.log.last_seq() + 1,
                f"$.{CALIBRATION_KEY}",
            ),
        )
        if rows:
            state = json.loads(rows[0]["state"])
            if isinstance(state, dict):
                self.counter.restore(state)

    def _index_metadata(self, seq: int) -> dict[str, Any] | None:
        event = self.log.get(seq)
        kind = INDEX_KIND if self.with_index else STATE_KIND
        if event is None or event.session_id != self.session_id or event.kind != kind:
            return None
        return event.metadata

    def _restore_turns(
        self, state: dict[str, Any], *, after_index: int, before_seq: int | None = None
    ) -> None:
        is_evicted = self._evicted_test(state)
        pinned, folded = set(state["pinned"]), set(state["folded"])
        events = self.log.session_events(
            self.session_id, after_seq=int(state["live_from"]) - 1, before_seq=before_seq
        )
        for event in events:
            if VIEW_KEY not in event.metadata or is_evicted(event.seq):
                continue
            turn = turn_from_event(event, self.log.full_text(event))
            turn.pinned = event.seq in pinned
            if event.seq in folded and turn.role == "tool":
                self._fold_restored(turn)
            self._push_restored(turn, counted=event.seq > after_index)

    def _keep_live(self, state: dict[str, Any]) -> None:
        """Apply an index event's view state to the live turns (what the eviction did)."""
        is_evicted = self._evicted_test(state)
        pinned, folded = set(state["pinned"]), set(state["folded"])
        kept = [t for t in self._turns if t.seq is not None and not is_evicted(t.seq)]
        for turn in kept:
            turn.pinned = turn.seq in pinned
            if turn.seq in folded and turn.role == "tool" and not turn.folded:
                self._fold_restored(turn)
        self._turns = kept
        self._turns_raw = sum(t.tokens for t in kept)

    def _evicted_test(self, state: dict[str, Any]) -> Callable[[int], bool]:
        """Whether a seq left the view: before ``live_from``, or in an index span unpinned."""
        spans = [(b.lo, b.hi) for b in self.index.blocks()]
        starts = [lo for lo, _ in spans]
        live_from, pinned = int(state["live_from"]), set(state["pinned"])

        def is_evicted(seq: int) -> bool:
            if seq < live_from:
                return True
            at = bisect_right(starts, seq) - 1
            return at >= 0 and spans[at][0] <= seq <= spans[at][1] and seq not in pinned

        return is_evicted

    def _fold_restored(self, turn: Turn) -> None:
        turn.stub_tokens = self._message_raw(fold_stub(turn))
        turn.folded = True
        turn.cache.clear()

    def _push_restored(self, turn: Turn, *, counted: bool) -> None:
        assistant, headlined = self.metrics.assistant_turns, self.metrics.headlined_turns
        self._push(turn)
        if not counted:
            self.metrics.assistant_turns, self.metrics.headlined_turns = assistant, headlined

    def _restore_metrics(self, counters: dict[str, int]) -> None:
        self.metrics.evictions = counters.get("evictions", 0)
        self.metrics.rollups = counters.get("rollups", 0)
        self.metrics.evicted_turns = counters.get("evicted_turns", 0)
        self.metrics.folds = counters.get("folds", 0)
        self.metrics.assistant_turns = counters.get("assistant_turns", 0)
        self.metrics.headlined_turns = counters.get("headlined_turns", 0)


def _check_settings(session_id: str, budget: int, rho: float, k: int, tail: int, keep: int) -> None:
    if not session_id:
        raise UsageError("a working view needs a non-empty session_id")
    if budget <= 0:
        raise UsageError(f"budget_tokens must be positive, got {budget}")
    if not 0 < rho <= 1:
        raise UsageError(f"rho must be in (0, 1], got {rho}")
    if k < 3:
        raise UsageError(f"k must be at least 3 (with k={k} the index would grow linearly)")
    if tail < 0 or keep < 0:
        raise UsageError(f"tail_groups and keep_results must be >= 0, got {tail} and {keep}")


def _check_pairing(turn: Turn, open_calls: set[str]) -> None:
    if turn.role == "tool":
        if turn.tool_call_id not in open_calls:
            raise UsageError(
                f"tool result for call {turn.tool_call_id!r} has no open tool call in the view; "
                "add the assistant message that makes the call first"
            )
        open_calls.discard(turn.tool_call_id)
    elif open_calls:
        raise UsageError(
            f"tool call(s) {', '.join(sorted(open_calls))} still await results; add them first"
        )
    elif turn.role == "assistant":
        open_calls |= set(turn.call_ids)


def _anthropic_body(body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages = merge_anthropic(body)
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": _PLACEHOLDER})
    return messages


def load_index(
    log: EventStore, session_id: str, *, before_seq: int | None = None
) -> dict[str, Any] | None:
    """Return a session's latest eviction index as data (what ``ms.index()`` returns), or None.

    ``before_seq``: the latest index written before that seq (the index as it stood then).
    Blocks stored by reference are put back in place; read the index through this (or
    :meth:`WorkingView.index_data`), never from the raw event metadata.

    Raises:
        IntegrityError: the index event is malformed or a reference does not resolve.
    """
    latest = _latest_index_event(log, session_id, before_seq=before_seq)
    if latest is None:
        return None

    def load(seq: int) -> dict[str, Any] | None:
        event = log.get(seq)
        if event is None or event.session_id != session_id or event.kind != INDEX_KIND:
            return None
        return event.metadata

    try:
        data, _ = unpack(latest.metadata, latest.seq, load)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IntegrityError(
            f"the eviction index at seq {latest.seq} of session {session_id!r} in {log.path} is "
            f"malformed ({type(exc).__name__}: {exc}); it was edited or not written by scrollctx",
            path=str(log.path),
        ) from exc
    return data


def live_seqs(
    log: EventStore, session_id: str, *, before_seq: int, with_index: bool = True
) -> tuple[set[int], set[int]]:
    """Return the seqs of the turns live in the view just before ``before_seq``, and of those
    folded: what ``restore(before_seq=...)`` would hold, by the same rules, without reading a
    turn's text or counting a token (to compare two calls cheaply).

    Raises:
        IntegrityError: the index event is malformed.
    """
    kind = INDEX_KIND if with_index else STATE_KIND
    latest = _latest_index_event(log, session_id, kind, before_seq)
    view = WorkingView(log, session_id, budget_tokens=1, with_index=with_index)
    try:
        state = view._load_index(latest, view._index_metadata) if latest else _NO_STATE
        is_evicted = view._evicted_test(state)
        folded = set(state["folded"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _malformed(log, session_id, latest, exc) from exc
    rows = log.execute(
        "SELECT seq, role FROM conversation_history WHERE session_id = ? AND seq >= ? "
        "AND seq < ? AND json_type(metadata, ?) IS NOT NULL",
        (session_id, int(state["live_from"]), before_seq, f"$.{VIEW_KEY}"),
    )
    live = {int(row[0]) for row in rows if not is_evicted(int(row[0]))}
    return live, {int(r[0]) for r in rows if int(r[0]) in live & folded and r[1] == "tool"}


def index_events(log: EventStore, session_id: str) -> list[dict[str, Any]]:
    """Return a session's eviction index events, oldest first: ``seq``, ``created_at`` and
    their counters (``evictions``, ``rollups``, ``folds``...) and ``blocks`` (read from the
    stored metadata, whose counters and tier sizes are never stored by reference)."""
    rows = log.execute(
        "SELECT seq, created_at, json_extract(metadata, '$.counters') AS counters, "
        "(SELECT sum(json_array_length(tier.value, '$.blocks')) "
        " FROM json_each(metadata, '$.tiers') AS tier) AS blocks "
        "FROM conversation_history WHERE session_id = ? AND kind = ? ORDER BY seq",
        (session_id, INDEX_KIND),
    )
    found = []
    for row in rows:
        counters = json.loads(row["counters"]) if row["counters"] else {}
        found.append(
            {"seq": int(row["seq"]), "created_at": row["created_at"],
             "blocks": int(row["blocks"] or 0), **counters}
        )  # fmt: skip
    return found


def call_seqs(log: EventStore, session_id: str) -> list[int]:
    """Return the seqs of a session's model-call responses (its assistant view turns), in order.

    Model call N of a session is the one its N-th response answers; what that call received is
    ``WorkingView.restore(..., before_seq=call_seqs(log, session_id)[N - 1])``.
    """
    rows = log.execute(
        "SELECT seq FROM conversation_history WHERE session_id = ? AND kind = ? "
        "AND role = 'assistant' AND json_type(metadata, ?) IS NOT NULL ORDER BY seq",
        (session_id, Kind.MODEL_TURN, f"$.{VIEW_KEY}"),
    )
    return [int(row[0]) for row in rows]


def _latest_index_event(
    log: EventStore, session_id: str, kind: str = INDEX_KIND, before_seq: int | None = None
) -> Event | None:
    rows = log.execute(
        "SELECT seq FROM conversation_history WHERE session_id = ? AND kind = ? AND seq < ? "
        "ORDER BY seq DESC LIMIT 1",
        (session_id, kind, before_seq if before_seq is not None else log.last_seq() + 1),
    )
    return log.get(int(rows[0]["seq"])) if rows else None


def _session_pages(log: EventStore, session_id: str) -> Iterator[Event]:
    """A session's events in seq order, read a window of seqs at a time (bounded memory)."""
    last = log.last_seq()
    for lo in range(0, last, _PAGE_SEQS):
        yield from log.session_events(session_id, after_seq=lo, before_seq=lo + _PAGE_SEQS + 1)


def _malformed(
    log: EventStore, session_id: str, index_event: Event | None, exc: Exception
) -> IntegrityError:
    where = f"the eviction index at seq {index_event.seq}" if index_event else "a view event"
    return IntegrityError(
        f"cannot restore session {session_id!r} from {log.path}: {where} is malformed "
        f"({type(exc).__name__}: {exc}); the events were not written by this version "
        "of scrollctx or were edited",
        path=str(log.path),
    )
