"""Algorithm 1 at its edges: exactly at rho*C, a promised tail, a call still awaiting a result.

Each test pins one boundary a one-line change would move; the property test in
test_eviction.py covers the same ground at random, these cover it every run.
"""

from __future__ import annotations

from typing import Any

import pytest
from view_session import Session, text_of

from scrollctx.errors import ContextOverflow
from scrollctx.log import EventLog
from scrollctx.view import TokenCounter, WorkingView


def _calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "working",
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "repl_exec", "arguments": "{}"}}
            for i in ids
        ],
    }


def _result(call_id: str, words: int, salt: int) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text_of(words, salt)}


def _state(view: WorkingView) -> list[tuple[int | None, bool]]:
    return [(t.seq, t.folded) for t in view.turns]


def test_eviction_runs_only_above_rho_times_the_budget(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "system", budget_tokens=100_000)
    session = Session(view)
    session.user(10)
    for size in (300, 300, 300):
        session.tools([size])
        session.reply(20)
    session.user(10)  # a new request: everything before it may be folded or evicted
    session.persist()
    at = view.tokens

    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0}
    exactly = WorkingView.restore(view_log, "s", "system", budget_tokens=at, **loose)
    assert exactly.tokens == exactly.target == at
    before = _state(exactly)
    report = exactly.ensure_budget()
    assert not report.evicted and report.index_seq is None and _state(exactly) == before

    over = WorkingView.restore(view_log, "s", "system", budget_tokens=at - 1, **loose)
    over.ensure_budget()
    assert over.tokens < at and _state(over) != before


def test_the_promised_tail_stays_even_when_that_overflows_the_window(
    view_log: EventLog,
) -> None:
    # Two tool groups of ~0.6 budget each behind the request: the last two groups are the
    # protected tail (tail_groups=2), so nothing may be folded or evicted from them and the
    # view must overflow rather than break the promise.
    view = WorkingView(view_log, "s", "", budget_tokens=1500, tail_groups=2, keep_results=0)
    session = Session(view)
    session.user(5)
    session.tools([250])
    session.tools([500])
    session.tools([500])
    session.persist()
    tail = [t.seq for t in view.turns[-4:]]

    with pytest.raises(ContextOverflow, match="the last 2 groups"):
        view.ensure_budget()

    live = {t.seq: t for t in view.turns}
    assert all(seq in live and not live[seq].folded for seq in tail)


def test_a_view_that_can_shrink_to_exactly_the_window_does_not_overflow(
    view_log: EventLog,
) -> None:
    # Eviction brings the view down to the part it may not touch; when that part needs
    # exactly budget_tokens it fits (the window is "at most"), one token less overflows.
    view = WorkingView(view_log, "s", "", budget_tokens=100_000, tail_groups=2, keep_results=0)
    session = Session(view)
    session.user(5)
    for size in (250, 500, 500):
        session.tools([size])
    session.persist()
    kept = {"rho": 0.5, "tail_groups": 2, "keep_results": 0}
    with pytest.raises(ContextOverflow) as overflow:
        WorkingView.restore(view_log, "s", "", budget_tokens=1000, **kept).ensure_budget()
    floor = overflow.value.tokens

    exactly = WorkingView.restore(view_log, "s", "", budget_tokens=floor, **kept)
    assert exactly.ensure_budget().tokens_after == floor
    with pytest.raises(ContextOverflow):
        WorkingView.restore(view_log, "s", "", budget_tokens=floor - 1, **kept).ensure_budget()


def test_a_region_cut_mid_exchange_gives_up_only_what_it_must(view_log: EventLog) -> None:
    # The protected tail starts inside the first exchange (its last tool group and the new
    # request), so no group before it ends an exchange: eviction may then end mid-exchange,
    # and when the long request alone makes the view fit, only the request leaves.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(300)
    for _ in range(3):
        session.tools([5])
    session.user(5)
    session.persist()
    first = view.turns[0].seq
    kept = {"rho": 1.0, "tail_groups": 2, "keep_results": 0}
    view = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - 5, **kept)
    report = view.ensure_budget()
    assert report.evicted == [(first, first)] and report.evicted_turns == 1


@pytest.mark.parametrize("where", ["before", "inside"])
def test_after_folds_a_span_leaves_only_if_the_view_is_still_over(
    view_log: EventLog, where: str
) -> None:
    # Tool results folded before the active request (a new request follows them) or inside
    # it (one long request, where only the second pass may act): when folding brings the view
    # to exactly rho*C, no group leaves; when it leaves the view one token over, a span does.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(5)
    for _ in range(3):
        session.tools([300])
    if where == "before":
        session.reply(5)
        session.user(5)
    else:
        session.tools([300])
    session.persist()
    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0, "before_seq": view_log.last_seq() + 1}
    folding = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - 1, **loose)
    folded = folding.ensure_budget()
    assert folded.folded and not folded.evicted
    exactly = WorkingView.restore(view_log, "s", "", budget_tokens=folded.tokens_after, **loose)
    report = exactly.ensure_budget()
    assert report.folded == folded.folded and not report.evicted
    assert report.tokens_after == folded.tokens_after == exactly.target
    over = WorkingView.restore(view_log, "s", "", budget_tokens=folded.tokens_after - 1, **loose)
    report = over.ensure_budget()
    assert report.folded == folded.folded and report.evicted
    assert report.tokens_after <= over.target


def test_a_call_still_awaiting_a_result_keeps_its_group_live(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=1200, tail_groups=0, keep_results=0)
    view.append({"role": "user", "content": text_of(5, 1)})
    view.append(_calls("a"))
    view.append(_result("a", 300, 2))
    view.append(_calls("b", "c"))
    view.append(_result("b", 300, 3))  # "c" has not answered yet
    view.persist()
    waiting = [t.seq for t in view.turns[-2:]]

    try:
        view.ensure_budget()
    except ContextOverflow:
        pass  # allowed: the open group may be too big to keep within the window

    live = {t.seq: t for t in view.turns}
    assert all(seq in live and not live[seq].folded for seq in waiting)
    view.append(_result("c", 5, 4))
    pending: list[str] = []
    for message in view.render("openai"):
        if message["role"] == "tool":
            assert message["tool_call_id"] == pending.pop(0)
        else:
            assert not pending, "a tool call lost its result"
            pending = [call["id"] for call in message.get("tool_calls") or []]


def test_by_default_the_last_two_groups_stay(view_log: EventLog) -> None:
    # One long request answered by six replies (no tool results, so keep_results plays no
    # part): at two thirds of its size (the request, its last two replies and the index fit
    # the window, not rho of it) the second pass evicts inside the request, which stays
    # pinned, and the last two groups (tail_groups' default) stay live.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(5)
    for _ in range(6):
        session.reply(100)
    session.persist()
    seqs = [t.seq for t in view.turns]
    tight = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens * 2 // 3)
    tight.ensure_budget()
    assert [t.seq for t in tight.turns] == [seqs[0], *seqs[-2:]]


def test_a_region_cut_mid_exchange_still_evicts_whole_exchanges_before_the_cut(
    view_log: EventLog,
) -> None:
    # The protected tail (two groups) starts inside the second exchange, so the region may
    # end mid-exchange, but only after its last whole exchange: the long first request is
    # evicted with its answer, not alone, though the request alone would make the view fit.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(300)
    session.reply(5)
    session.user(5)
    session.reply(5)
    session.user(5)
    session.persist()
    first, answer = (t.seq for t in view.turns[:2])
    kept = {"rho": 1.0, "tail_groups": 2, "keep_results": 0}
    view = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - 5, **kept)
    report = view.ensure_budget()
    assert report.evicted == [(first, answer)] and report.evicted_turns == 2


def test_without_an_index_an_exchange_that_fits_exactly_leaves_alone(view_log: EventLog) -> None:
    # With no index an evicted span adds nothing to the view, so when evicting the oldest
    # exchange brings the view to exactly rho*C, that exchange is all that leaves; one token
    # less, and the next exchange leaves with it, in the same span (one eviction).
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    for _ in range(4):
        session.user(20)
        session.reply(40)
    session.persist()
    first = view.turns[:2]
    exchange = sum(t.tokens for t in first)
    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0, "with_index": False}
    loose["before_seq"] = view_log.last_seq() + 1  # each view starts from the same log
    exactly = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - exchange, **loose)
    report = exactly.ensure_budget()
    assert report.evicted == [(first[0].seq, first[1].seq)]
    assert report.tokens_after == exactly.target
    budget = exactly.target - 1
    over = WorkingView.restore(view_log, "s", "", budget_tokens=budget, **loose)
    report = over.ensure_budget()
    assert report.evicted == [(first[0].seq, view.turns[3].seq)]
    assert over.metrics.evictions == 1 and report.tokens_after <= over.target


def test_the_active_request_is_left_alone_once_the_view_is_at_rho_times_the_budget(
    view_log: EventLog,
) -> None:
    # evict_to aims far lower, but the second pass (inside the active request) runs only
    # while the view is above rho*C: when evicting everything before the request brings the
    # view to exactly rho*C, the request's own turns all stay.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(5)
    session.tools([300])
    session.reply(5)
    session.user(5)
    for _ in range(3):
        session.tools([100])
    session.persist()
    active = [t.seq for t in view.turns[4:]]
    settings = {"rho": 1.0, "evict_to": 0.01, "tail_groups": 1, "keep_results": 1}
    settings["before_seq"] = view_log.last_seq() + 1  # each view starts from the same log
    probe = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - 1, **settings)
    history = probe.ensure_budget()
    assert [t.seq for t in probe.turns] == active  # everything before the request left
    at = history.tokens_after
    exactly = WorkingView.restore(view_log, "s", "", budget_tokens=at, **settings)
    report = exactly.ensure_budget()
    assert report.tokens_after == at == exactly.target
    assert [t.seq for t in exactly.turns] == active and not any(t.pinned for t in exactly.turns)


def test_a_new_request_keeps_its_turns_when_the_old_pinned_request_leaving_is_enough(
    view_log: EventLog,
) -> None:
    # A long request whose own turns were all evicted stays live, pinned. Once a new request
    # has arrived, that old request is the first to leave; when its leaving makes the view
    # fit, the new request's turns are neither folded nor evicted.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000, tail_groups=0, keep_results=0)
    session = Session(view)
    session.user(300)
    for _ in range(3):
        session.tools([200])
    session.persist()
    view.budget_tokens = 900
    view.ensure_budget()
    (old,) = view.turns
    assert old.pinned
    session.user(5)
    for _ in range(3):
        session.tools([40])
    session.persist()
    new = [t.seq for t in view.turns[1:]]
    view.budget_tokens = int((view.tokens - old.tokens // 2) / view.rho)
    report = view.ensure_budget()
    assert report.evicted_turns == 1 and not report.folded and not report.evicted
    assert [t.seq for t in view.turns] == new and not any(t.folded for t in view.turns)


def test_the_first_eviction_inside_a_long_request_is_one_span(view_log: EventLog) -> None:
    # The span priced for the second pass includes the request's own line (the request is
    # pinned, and listed, by this eviction): one round, one span, one index event.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000, tail_groups=1, keep_results=1)
    session = Session(view)
    session.user(40)
    for _ in range(6):
        session.tools([100])
    session.persist()
    request = view.turns[0]
    view.budget_tokens = int(view.tokens * 0.5 / view.rho)
    report = view.ensure_budget()
    assert request.pinned and len(report.evicted) == 1 and report.evicted[0][0] == request.seq
    assert view.metrics.evictions == 1 and report.tokens_after <= view.target


def test_an_old_pinned_request_whose_leaving_fits_exactly_leaves_alone(view_log: EventLog) -> None:
    # As above, with an exchange between the old request and the new one: when the old
    # request's leaving brings the view to exactly rho*C, that exchange stays too.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000, tail_groups=0, keep_results=0)
    session = Session(view)
    session.user(300)
    for _ in range(3):
        session.tools([200])
    session.persist()
    view.budget_tokens = 900
    view.ensure_budget()
    (old,) = view.turns
    session.user(5)
    session.reply(30)
    session.user(5)
    for _ in range(2):
        session.tools([40])
    session.persist()
    later = [t.seq for t in view.turns[1:]]
    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0}
    exactly = WorkingView.restore(
        view_log, "s", "", budget_tokens=view.tokens - old.tokens, **loose
    )
    report = exactly.ensure_budget()
    assert report.evicted_turns == 1 and report.tokens_after == exactly.target
    assert [t.seq for t in exactly.turns] == later


def test_a_calibrated_budget_at_a_floating_point_edge_is_still_met(view_log: EventLog) -> None:
    # 170 raw tokens at ratio 1.1 scale to 188 (170 * 1.1 is 187.00000000000003), yet
    # 187 / 1.1 floors to 170: the view once computed no excess, and raised ContextOverflow
    # with three foldable tool results in the active request. It fits now.
    counter = TokenCounter(lambda text: text.split())
    view = WorkingView(view_log, "s", "", budget_tokens=10**6, counter=counter, tail_groups=0,
                       keep_results=0)  # fmt: skip
    view.append({"role": "user", "content": "do it now please"})
    for i in range(3):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        view.append({"role": "assistant", "content": "", "tool_calls": [call]})
        view.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x " * 48})
    counter.restore({"ratio": 1.1, "samples": 1})
    assert view.tokens == 188 and counter.fitting(187) == 169
    view.budget_tokens, view.rho = 187, 1.0
    view.ensure_budget()
    assert view.tokens <= 187
