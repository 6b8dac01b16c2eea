"""The view of any past model call, rebuilt from the log: ``restore(before_seq=)`` and ``replay``.

A live view is driven through folds, evictions, roll-ups and a pinned request, and every
request it built is kept; each one must come back byte for byte from the log alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from view_session import Session

from scrollctx.log import EventLog, NewEvent
from scrollctx.view import WorkingView, call_seqs, index_events, live_seqs

SYSTEM = "You are a test agent."
BUDGET = 1500


@dataclass
class LiveCall:
    seq: int  # the assistant turn answering the call
    digest: str
    messages: list[dict[str, Any]]
    tokens: int
    evictions: int
    folds: int


def _drive(view_log: EventLog, *, with_index: bool = True) -> list[LiveCall]:
    view = WorkingView(
        view_log, "s1", SYSTEM, budget_tokens=BUDGET, k=3, tail_groups=1, keep_results=1,
        with_index=with_index,
    )  # fmt: skip
    session = Session(view)
    calls: list[LiveCall] = []

    def call(answer: Any) -> None:
        digest = f"x: int = {len(calls)}"
        session.persist()
        view.ensure_budget(digest=digest)
        built = view.build("openai")
        answer()
        session.persist()
        seq = next(t.seq for t in reversed(view.turns) if t.role == "assistant")
        metrics = view.metrics
        calls.append(
            LiveCall(seq, digest, built.messages, built.tokens, metrics.evictions, metrics.folds)
        )

    for step in range(14):
        session.user(40 + step)
        call(lambda: session.tools([60, 30]))
        call(lambda: session.reply(20))
    session.user(30)  # one long request: its own history is evicted while it stays pinned
    for _ in range(6):
        call(lambda: session.tools([150]))
    assert view.metrics.evictions > 3 and view.metrics.rollups > 0 and view.metrics.folds > 0
    assert any(t.pinned for t in view.turns) or not with_index
    return calls


@pytest.mark.parametrize("with_index", [True, False], ids=["index", "no-index"])
def test_restore_before_a_calls_answer_rebuilds_exactly_what_that_call_sent(
    view_log: EventLog, with_index: bool
) -> None:
    calls = _drive(view_log, with_index=with_index)
    for call in calls:
        view = WorkingView.restore(
            view_log, "s1", SYSTEM, before_seq=call.seq, budget_tokens=BUDGET,
            with_index=with_index,
        )  # fmt: skip
        built = view.build("openai", call.digest)
        assert json.dumps(built.messages) == json.dumps(call.messages), call.seq
        assert built.tokens == call.tokens
        live, folded = live_seqs(view_log, "s1", before_seq=call.seq, with_index=with_index)
        assert live == {t.seq for t in view.turns}
        assert folded == {t.seq for t in view.turns if t.folded}


def test_a_sessions_calls_and_index_events_are_read_back_from_the_log(view_log: EventLog) -> None:
    calls = _drive(view_log)
    assert call_seqs(view_log, "s1") == [call.seq for call in calls]
    events = index_events(view_log, "s1")
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    evictions = [e["evictions"] for e in events]
    assert evictions == sorted(evictions)
    assert (evictions[-1], events[-1]["folds"]) == (calls[-1].evictions, calls[-1].folds)
    last = calls[-1].seq
    assert live_seqs(view_log, "s1", before_seq=last) == live_seqs(
        view_log, "s1", before_seq=last, with_index=True
    )  # the index is the default, as in WorkingView
    assert live_seqs(log=view_log, session_id="s1", before_seq=last) == live_seqs(
        view_log, "s1", before_seq=last
    )  # every argument by name


def test_replay_yields_every_call_as_it_was_sent(view_log: EventLog) -> None:
    calls = _drive(view_log)
    digests = {call.seq: call.digest for call in calls}
    snapshots = list(
        WorkingView.replay(
            view_log, "s1", SYSTEM, budget_tokens=BUDGET, digest_of=lambda e: digests[e.seq]
        )
    )
    assert [s.seq for s in snapshots] == [c.seq for c in calls]
    assert [s.tokens for s in snapshots] == [c.tokens for c in calls]
    assert [(s.evictions, s.folds) for s in snapshots] == [(c.evictions, c.folds) for c in calls]
    histories = [s.history_tokens for s in snapshots]
    assert histories == sorted(histories) and histories[-1] > 3 * max(s.tokens for s in snapshots)
    assert all(s.tokens <= s.history_tokens for s in snapshots)
    assert snapshots[0].history_tokens == snapshots[0].tokens  # nothing evicted before call 1
    named = WorkingView.replay(
        log=view_log, session_id="s1", system_prompt=SYSTEM, budget_tokens=BUDGET,
        digest_of=lambda e: digests[e.seq],
    )  # fmt: skip
    assert list(named) == snapshots  # every argument by name, as restore takes them


def test_replay_reads_a_long_log_page_by_page_without_missing_a_seq(view_log: EventLog) -> None:
    # replay reads the log a window of 2000 seqs at a time: a call answered at seq 2000, the
    # edge of the first window, is one of the calls it yields.
    view_log.append_many(
        NewEvent(session_id="other", kind="conversation", content=f"filler {i}")
        for i in range(1998)
    )
    view = WorkingView(view_log, "s1", SYSTEM, budget_tokens=BUDGET)
    for n in range(3):
        view.append({"role": "user", "content": f"question {n}"})
        view.append({"role": "assistant", "content": f"answer {n}"})
    view.persist()
    answers = call_seqs(view_log, "s1")
    assert answers == [2000, 2002, 2004]
    replayed = list(WorkingView.replay(view_log, "s1", SYSTEM, budget_tokens=BUDGET))
    assert [snapshot.seq for snapshot in replayed] == answers
    # ... and reads seq 2001, the first of the next window, once (not once per window).
    restored = [
        WorkingView.restore(view_log, "s1", SYSTEM, before_seq=seq, budget_tokens=BUDGET)
        for seq in answers
    ]
    assert [s.tokens for s in replayed] == [view.build().tokens for view in restored]


def test_restore_without_before_seq_is_the_view_after_the_last_event(view_log: EventLog) -> None:
    _drive(view_log)
    latest = WorkingView.restore(view_log, "s1", SYSTEM, budget_tokens=BUDGET)
    beyond = WorkingView.restore(
        view_log, "s1", SYSTEM, before_seq=view_log.last_seq() + 1, budget_tokens=BUDGET
    )
    assert json.dumps(latest.build().messages) == json.dumps(beyond.build().messages)
    named = WorkingView.restore(
        log=view_log, session_id="s1", system_prompt=SYSTEM, budget_tokens=BUDGET
    )  # every argument by name, as the constructor takes them
    assert json.dumps(named.build().messages) == json.dumps(latest.build().messages)
