"""Algorithm 1 on a real log: every property the issue lists, under random and scripted sessions."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from view_session import (
    Session,
    check_invariants,
    check_provider_messages,
    protected_seqs,
    text_of,
)

from scrollctx.errors import ContextOverflow, StoreError, UsageError
from scrollctx.log import EventLog, NewEvent
from scrollctx.view import INDEX_KIND, TokenCounter, WorkingView, live_seqs, load_index
from scrollctx.view._stored import STORED_AT, unpack
from scrollctx.view._working import STATE_KIND

OPS = st.one_of(
    st.tuples(st.just("user"), st.integers(1, 60)),
    st.tuples(st.just("nudge"), st.integers(1, 20)),
    st.tuples(st.just("tools"), st.lists(st.integers(1, 250), min_size=1, max_size=3)),
    st.tuples(st.just("reply"), st.integers(1, 120)),
    st.tuples(st.just("restart"), st.just(0)),
)


def _run(session: Session, op: tuple[Any, ...]) -> None:
    kind, arg = op
    if kind == "user":
        session.user(arg)
    elif kind == "nudge":
        session.user(arg, synthetic=True)
    elif kind == "tools":
        session.tools(arg, headline=len(arg) % 2 == 1)
    else:
        session.reply(arg, headline=arg % 3 != 0)


def _restored_equals(view: WorkingView, log: EventLog) -> None:
    # A restart: a new EventLog and a new view over the same file.
    with EventLog.open(log.path) as reopened:
        again = WorkingView.restore(
            reopened,
            view.session_id,
            view.system_prompt,
            budget_tokens=view.budget_tokens,
            rho=view.rho,
            tail_groups=view.tail_groups,
            keep_results=view.keep_results,
            k=view.index.k,
            with_index=view.with_index,
        )
        again.set_digest(view.digest)
        assert again.index_text() == view.index_text()
        assert again.index_data() == view.index_data()
        assert json.dumps(again.render("openai")) == json.dumps(view.render("openai"))
        assert json.dumps(again.render("anthropic")) == json.dumps(view.render("anthropic"))
        assert again.tokens == view.tokens
        assert again.metrics.evictions == view.metrics.evictions
        assert again.metrics.folds == view.metrics.folds
        assert again.metrics.assistant_turns == view.metrics.assistant_turns
        assert again.metrics.headlined_turns == view.metrics.headlined_turns


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=st.lists(OPS, min_size=1, max_size=30),
    budget=st.integers(1000, 6000),
    rho=st.sampled_from([0.5, 0.8, 1.0]),
    k=st.integers(3, 5),
    tail=st.integers(0, 3),
    keep=st.integers(0, 3),
    provider=st.sampled_from(["openai", "anthropic"]),
    headroom=st.sampled_from([None, 0.5]),
)
def test_properties_hold_after_any_appends_and_evictions(
    fast_dir: Path,
    ops: list[tuple[Any, ...]],
    budget: int,
    rho: float,
    k: int,
    tail: int,
    keep: int,
    provider: str,
    headroom: float | None,
) -> None:
    path = Path(tempfile.mkdtemp(dir=fast_dir)) / "history.db"
    settings: dict[str, Any] = {
        "budget_tokens": budget,
        "rho": rho,
        "k": k,
        "tail_groups": tail,
        "keep_results": keep,
        "evict_to": None if headroom is None else headroom * rho,
    }
    with ExitStack() as stack:
        log = stack.enter_context(EventLog.open(path))
        view = WorkingView(log, "s", "system", **settings)
        session = Session(view, provider=provider)
        for op in ops:
            if op[0] == "restart":
                # A new process: a new EventLog and a view rebuilt from the file alone.
                log = stack.enter_context(EventLog.open(path))
                view = session.view = WorkingView.restore(log, "s", "system", **settings)
                continue
            _run(session, op)
            session.persist()
            before = view.index_text()
            protected = protected_seqs(view)
            try:
                report = view.ensure_budget(digest="x: int = 1")
            except ContextOverflow as exc:
                assert exc.tokens > budget
                check_invariants(view, log, session, None, overflowed=True, protected=protected)
                continue
            assert view.tokens <= budget
            if report.evicted and report.rollups == 0 and before:
                assert view.index_text().startswith(before)
            check_invariants(view, log, session, report, protected=protected)
            check_provider_messages(view)
        _restored_equals(view, log)


def _long_session(log: EventLog, steps: int, **settings: Any) -> tuple[WorkingView, Session]:
    view = WorkingView(log, "long", "system prompt", **settings)
    session = Session(view)
    for step in range(steps):
        session.user(12)
        session.persist()
        view.ensure_budget()
        session.tools([300 + (step % 5) * 40], headline=step % 4 != 0)
        session.persist()
        view.ensure_budget()
        session.reply(30, headline=step % 5 != 0)
        session.persist()
    return view, session


def test_a_long_scripted_session_stays_bounded_and_restores(view_log: EventLog) -> None:
    view, session = _long_session(view_log, 120, budget_tokens=5000, k=3)
    check_invariants(view, view_log, session, None)
    check_provider_messages(view)
    assert view.metrics.evictions > 20 and view.metrics.folds > 50
    assert view.metrics.rollups > 0 and len(view.index.tiers) >= 3
    assert view.tokens <= 5000
    assert view.metrics.headline_compliance == pytest.approx(
        view.metrics.headlined_turns / view.metrics.assistant_turns
    )
    _restored_equals(view, view_log)
    latest = view_log.execute(
        "SELECT seq, metadata FROM conversation_history WHERE kind = ? ORDER BY seq DESC LIMIT 1",
        (INDEX_KIND,),
    )
    stored = json.loads(latest[0]["metadata"])
    data, _ = unpack(stored, latest[0]["seq"], lambda seq: view_log.get(seq).metadata)
    assert data["tiers"] == view.index_data()["tiers"]
    assert data["view_state"] == view.index_data()["view_state"]


def test_user_requests_inside_evicted_spans_stay_visible(view_log: EventLog) -> None:
    view, _ = _long_session(view_log, 40, budget_tokens=4000, k=4)
    text = view.index_text()
    tier0 = view.index.tiers[0][-1]
    assert any(line.kind == "user" for line in tier0.lines)
    for line in tier0.lines:
        if line.kind == "user":
            assert f"seq {line.lo}" in text and line.text in text
    rolled = [line for block in view.index.blocks()[:-1] for line in block.lines]
    assert sum(line.anchor_count for line in rolled) > 0


def test_a_long_active_turn_evicts_inside_it_but_keeps_the_request(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "system", budget_tokens=2000, tail_groups=1, keep_results=1)
    session = Session(view)
    session.user(10)
    session.persist()
    request = view.turns[0].seq
    for _ in range(30):
        session.tools([200])
        session.persist()
        view.ensure_budget()
        check_invariants(view, view_log, session, None)
        check_provider_messages(view)
    assert view.turns[0].seq == request and view.turns[0].pinned
    assert view.index.spans()[0][0] == request
    session.user(5)
    session.persist()
    for _ in range(6):
        session.tools([200])
        session.persist()
        view.ensure_budget()
        check_invariants(view, view_log, session, None)
        check_provider_messages(view)
    assert request not in {t.seq for t in view.turns}
    _restored_equals(view, view_log)


def test_nudges_do_not_move_the_active_turn(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=1500, tail_groups=0, keep_results=0)
    session = Session(view)
    session.user(10)
    for _ in range(12):
        session.tools([150])
        session.user(20, synthetic=True)
        session.persist()
        view.ensure_budget()
    request = next(t for t in view.turns if t.is_real_user)
    assert request.pinned and request.text == session.texts[request.seq]


def test_protected_part_over_the_window_raises(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=300)
    view.append({"role": "user", "content": text_of(50, 1)})
    view.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    view.append({"role": "tool", "tool_call_id": "c", "content": text_of(800, 2)})
    with pytest.raises(ContextOverflow, match="window is 300") as caught:
        view.ensure_budget()
    assert caught.value.tokens > 300 and caught.value.budget == 300
    assert view_log.count() == 3


def test_folding_comes_before_eviction_and_only_when_smaller(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=2000, tail_groups=1, keep_results=1)
    session = Session(view)
    session.user(5)
    session.tools([3])  # tiny result: a stub would be larger
    session.reply(5)
    session.user(5)
    session.tools([600])
    session.reply(5)
    session.user(5)
    session.tools([600])
    session.persist()
    report = view.ensure_budget()
    assert report.folded and not report.evicted
    folded = [t for t in view.turns if t.folded]
    assert [t.text for t in folded] == [session.texts[folded[0].seq]]
    stub = view.render("openai")[[t.seq for t in view.turns].index(folded[0].seq)]["content"]
    assert f"ms.expand({folded[0].seq})" in stub
    small = next(t for t in view.turns if t.role == "tool")
    assert not small.folded


def test_a_tool_result_is_folded_only_if_its_stub_costs_fewer_tokens(view_log: EventLog) -> None:
    # Counted in words, tool results of 40 to 90 words straddle the size of their stub (a
    # fixed pointer plus a preview of bounded length): those whose stub costs as much as the
    # result or more stay as they are, the others fold, and the report names their seqs.
    from scrollctx.view._eviction import fold_stub
    from scrollctx.view.tokens import MESSAGE_OVERHEAD

    counter = TokenCounter(lambda text: text.split())
    view = WorkingView(
        view_log, "s", "", budget_tokens=1_000_000, counter=counter, tail_groups=0,
        keep_results=0,
    )  # fmt: skip
    for words in range(40, 91, 2):
        view.append({"role": "user", "content": "next"})
        view.append(_call(f"c{words}"))
        view.append({"role": "tool", "tool_call_id": f"c{words}", "content": "x " * words})
    view.append({"role": "user", "content": "done?"})
    results = [t for t in view.turns if t.role == "tool"]
    stubs = {t.seq: counter.raw(fold_stub(t)) + MESSAGE_OVERHEAD for t in results}
    assert any(stubs[t.seq] == t.tokens for t in results)  # the boundary is among them
    smaller = [t.seq for t in results if stubs[t.seq] < t.tokens]
    assert 0 < len(smaller) < len(results)
    view.budget_tokens = int(view.tokens / view.rho) - 1
    report = view.ensure_budget()
    assert report.folded == smaller and not report.evicted
    assert [t.seq for t in view.turns if t.folded] == smaller


def _call(call_id: str) -> dict[str, Any]:
    function = {"name": "repl_exec", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _fail_inserts(path: Path, where: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TRIGGER fail_insert BEFORE INSERT ON conversation_history "
        f"WHEN {where} BEGIN SELECT RAISE(ABORT, 'disk refused the write'); END"
    )
    conn.commit()
    conn.close()


def test_no_eviction_when_persisting_fails(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        view = WorkingView(log, "s", "", budget_tokens=2000, tail_groups=0, keep_results=0)
        session = Session(view)
        for _ in range(3):
            session.user(5)
            session.tools([300])
            session.reply(5)
        _fail_inserts(path, "1")
        report = view.ensure_budget()
        assert report.persist_error and "disk refused" in report.persist_error
        assert not report.changed and all(t.seq is None for t in view.turns)
        assert log.count() == 0
        for _ in range(6):
            session.tools([300])
        with pytest.raises(ContextOverflow, match="but the window is 2000"):
            view.ensure_budget()


def test_a_crash_while_planning_rolls_the_persisted_turns_back_to_pending(
    view_log: EventLog,
) -> None:
    # ensure_budget persists the new turns and plans in one transaction: an exception in
    # between (here the tokenizer; an interrupt alike) takes both back, and the turns stay
    # pending with no seq, to be written by the next call.
    broken = {"now": False}

    def encode(text: str) -> list[int]:
        if broken["now"]:
            raise RuntimeError("tokenizer crashed")
        return [len(word) for word in text.split()]

    view = WorkingView(
        view_log, "s", "", budget_tokens=600, tail_groups=0, keep_results=0,
        counter=TokenCounter(encode),
    )  # fmt: skip
    session = Session(view)
    for _ in range(3):
        session.user(5)
        session.tools([300])
        session.reply(5)
    broken["now"] = True
    with pytest.raises(RuntimeError, match="tokenizer crashed"):
        view.ensure_budget()
    assert view_log.count() == 0 and all(t.seq is None for t in view.turns)
    broken["now"] = False
    assert view.ensure_budget().changed
    assert view_log.count() > len(view.turns) and all(t.seq is not None for t in view.turns)
    assert {t.seq for t in WorkingView.restore(view_log, "s", budget_tokens=600).turns} == {
        t.seq for t in view.turns
    }


def test_index_write_failure_leaves_the_view_unchanged(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        view = WorkingView(log, "s", "", budget_tokens=1500, tail_groups=0, keep_results=0)
        session = Session(view)
        for _ in range(3):
            session.user(5)
            session.tools([300])
            session.reply(5)
        session.persist()
        _fail_inserts(path, f"NEW.kind = '{INDEX_KIND}'")
        turns, tokens = view.turns, view.tokens
        with pytest.raises(StoreError, match="disk refused"):
            view.ensure_budget()
        assert view.turns == turns and view.tokens == tokens
        assert not any(t.folded for t in view.turns) and view.index.is_empty


def test_usage_calibration_changes_the_trigger(view_log: EventLog) -> None:
    view, _ = _long_session(view_log, 10, budget_tokens=100_000)
    tokens = view.tokens
    view.observe_usage(tokens * 2)  # before any build: nothing sent to compare it with
    assert view.counter.samples == 0 and view.tokens == tokens
    built = view.build("openai")
    assert view.metrics.calls == 1 and view.metrics.call_tokens == [built.tokens]
    view.observe_usage(built.tokens * 2)
    assert view.tokens >= 2 * built.tokens - 1


def test_a_calibrated_view_evicts_down_to_rho_times_the_budget_by_its_calibrated_count(
    view_log: EventLog,
) -> None:
    # The endpoint counts twice the estimate: the view is over rho*C by its calibrated count
    # (and would not be by the estimate) and evicts until that count fits.
    view = WorkingView(view_log, "s", "", budget_tokens=100_000)
    session = Session(view)
    for _ in range(20):
        session.user(10)
        session.reply(60)
    session.persist()
    estimate = view.build("openai").tokens
    view.observe_usage(estimate * 2)
    view.budget_tokens = int(estimate / view.rho)
    assert view.tokens > view.target >= estimate
    report = view.ensure_budget()
    assert report.evicted and report.tokens_after <= view.target


def test_settings_are_validated(view_log: EventLog) -> None:
    for bad, message in (
        ({"budget_tokens": 0}, r"budget_tokens must be positive, got 0"),
        ({"budget_tokens": 10, "rho": 0}, r"rho must be in \(0, 1\], got 0"),
        ({"budget_tokens": 10, "rho": 1.01}, r"rho must be in \(0, 1\], got 1.01"),
        ({"budget_tokens": 10, "k": 2}, r"k must be at least 3"),
        ({"budget_tokens": 10, "evict_to": 0}, r"evict_to must be in \(0, rho=0.8\], got 0"),
        ({"budget_tokens": 10, "tail_groups": -1}, r"must be >= 0, got -1 and 3"),
        ({"budget_tokens": 10, "keep_results": -1}, r"must be >= 0, got 2 and -1"),
    ):
        with pytest.raises(UsageError, match=message):
            WorkingView(view_log, "s", **bad)
    assert WorkingView(view_log, "s", budget_tokens=10, rho=1).target == 10
    assert WorkingView(view_log, "s", budget_tokens=10, rho=0.5, evict_to=0.5).evict_to == 0.5
    fresh = WorkingView(view_log, "s", budget_tokens=10)
    assert fresh.index_data()["k"] == 4  # the default tier width
    assert fresh.index_data()["view_state"] == {"live_from": 1, "pinned": [], "folded": []}
    with pytest.raises(UsageError, match="a working view needs a non-empty session_id"):
        WorkingView(view_log, "", budget_tokens=10)


def test_evicting_further_down_evicts_less_often(fast_dir: Path) -> None:
    counts = []
    for name, evict_to in (("exact", None), ("headroom", 0.5)):
        with EventLog.open(fast_dir / f"{name}.db") as log:
            view, session = _long_session(log, 60, budget_tokens=6000, evict_to=evict_to)
            check_invariants(view, log, session, None)
            counts.append(view.metrics.evictions)
    assert 0 < counts[1] < counts[0]
    with EventLog.open(fast_dir / "unused.db") as log, pytest.raises(UsageError, match="evict_to"):
        WorkingView(log, "s", budget_tokens=100, rho=0.5, evict_to=0.6)


def test_evict_to_evicts_down_to_that_share_of_the_window_not_further(
    view_log: EventLog,
) -> None:
    # Forty exchanges over rho*C: the view goes down to evict_to*C, taking the oldest
    # exchanges only until it fits there (not everything the protected tail lets go).
    view = WorkingView(view_log, "s", "", budget_tokens=10_000, evict_to=0.5)
    session = Session(view)
    for _ in range(40):
        session.user(4)
        session.reply(200)
    session.persist()
    assert view.tokens > view.target
    report = view.ensure_budget()
    low = 0.5 * view.budget_tokens
    assert report.evicted and low / 2 < report.tokens_after <= low


def test_a_view_whose_every_turn_left_is_live_from_after_the_last_evicted_seq(
    view_log: EventLog,
) -> None:
    # With no real request and nothing protected every turn may leave. The view state then
    # says the live part starts after the last evicted seq (ms.index()'s view_state), and a
    # restart rebuilds a view with no live turn.
    view = WorkingView(
        view_log, "s", "", budget_tokens=1000, rho=0.5, tail_groups=0, keep_results=0
    )
    session = Session(view)
    for _ in range(3):
        session.reply(150)
    session.persist()
    evicted = {t.seq for t in view.turns}
    assert view.ensure_budget().evicted and view.turns == []
    state = view.index_data()["view_state"]
    assert state["live_from"] == max(evicted) + 1
    assert load_index(view_log, "s")["view_state"] == state
    assert WorkingView.restore(view_log, "s", "", budget_tokens=1000).turns == []


def test_restore_after_a_crash_between_a_call_and_its_result(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=5000)
    session = Session(view)
    session.user(5)
    view.append(
        {
            "role": "assistant",
            "content": "Calling.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    again = WorkingView.restore(view_log, "s", "", budget_tokens=5000)
    with pytest.raises(UsageError, match="await results"):
        again.add({"role": "user", "content": "hello?"})
    again.append({"role": "tool", "tool_call_id": "c1", "content": "interrupted by a restart"})
    check_provider_messages(again)
    assert [t.role for t in again.turns] == ["user", "assistant", "tool"]


def test_a_malformed_index_event_is_an_integrity_error(view_log: EventLog) -> None:
    from scrollctx.errors import IntegrityError
    from scrollctx.log import NewEvent

    view = WorkingView(view_log, "s", "", budget_tokens=5000)
    view.append({"role": "user", "content": "hello"})
    view_log.append(NewEvent(session_id="s", kind=INDEX_KIND, metadata={"k": 4}))
    with pytest.raises(IntegrityError, match="eviction index at seq 2 is malformed"):
        WorkingView.restore(view_log, "s", budget_tokens=5000)
    with pytest.raises(IntegrityError, match="eviction index at seq 2 is malformed"):
        live_seqs(view_log, "s", before_seq=3)  # KeyError inside: no view_state, no tiers
    assert view_log.count() == 2


def test_an_index_event_with_a_bad_view_state_is_an_integrity_error(view_log: EventLog) -> None:
    from scrollctx.errors import IntegrityError

    view = WorkingView(view_log, "s", "", budget_tokens=5000)
    view.append({"role": "user", "content": "hello"})
    view.persist()
    state = {"live_from": "one", "pinned": [], "folded": []}  # a ValueError inside
    view_log.append(NewEvent(session_id="s", kind=INDEX_KIND, metadata=view.index.to_data(state)))
    for read in (
        lambda: WorkingView.restore(view_log, "s", budget_tokens=5000),
        lambda: live_seqs(view_log, "s", before_seq=3),
    ):
        with pytest.raises(IntegrityError, match="eviction index at seq 2 is malformed"):
            read()


@pytest.mark.parametrize(
    "damage",
    [
        {"tiers": [{"tier": 0}]},  # KeyError
        {"tiers": None},  # TypeError
        {"k": "four"},  # ValueError
        {"counters": []},  # AttributeError
    ],
    ids=["tier", "tiers", "k", "counters"],
)
def test_every_reader_of_a_malformed_index_event_raises_an_integrity_error(
    view_log: EventLog, damage: dict[str, Any]
) -> None:
    from scrollctx.errors import IntegrityError

    view = WorkingView(view_log, "s", "", budget_tokens=5000)
    view.append({"role": "user", "content": "hello"})
    state = {"live_from": 1, "pinned": [], "folded": []}
    metadata = view.index.to_data(state) | damage
    view_log.append(NewEvent(session_id="s", kind=INDEX_KIND, metadata=metadata))
    view.append({"role": "assistant", "content": "hi"})
    for read in (
        lambda: WorkingView.restore(view_log, "s", budget_tokens=5000),
        lambda: live_seqs(view_log, "s", before_seq=4),
        lambda: list(WorkingView.replay(view_log, "s", budget_tokens=5000)),
    ):
        with pytest.raises(IntegrityError, match="eviction index at seq 2 is malformed"):
            read()


def test_counters_an_index_event_lacks_restore_as_zero(view_log: EventLog) -> None:
    # An index written by an older version, or handed over, may lack a counter.
    view = WorkingView(view_log, "s", "", budget_tokens=5000)
    view.append({"role": "user", "content": "hello"})
    view.persist()
    data = view.index.to_data({"live_from": 1, "pinned": [], "folded": []}) | {"counters": {}}
    view_log.append(NewEvent(session_id="s", kind=INDEX_KIND, metadata=data))
    metrics = WorkingView.restore(view_log, "s", budget_tokens=5000).metrics
    assert (metrics.evictions, metrics.rollups, metrics.folds, metrics.evicted_turns) == (0,) * 4
    assert (metrics.assistant_turns, metrics.headlined_turns) == (0, 0)
    assert metrics.headline_compliance is None  # no response counted yet, not 0 of 1


def _anchors(view: WorkingView) -> dict[int, str]:
    data = view.index_data()
    lines = [line for tier in data["tiers"] for b in tier["blocks"] for line in b["lines"]]
    return {a["seq"]: a["text"] for line in lines for a in line["anchors"]}


def test_an_instruction_inside_an_evicted_tool_heavy_span_stays_an_anchor(
    view_log: EventLog,
) -> None:
    # #7836: a user instruction given in the middle of a long tool-heavy exchange must not
    # vanish with the span: once evicted it is a "user:" line with its seq, in text and data.
    view = WorkingView(view_log, "s", "", budget_tokens=2500, tail_groups=1, keep_results=1)
    session = Session(view)
    session.user(6)
    for _ in range(10):
        session.tools([120])
    view.append({"role": "user", "content": "Also: never delete the raw files."})
    (instruction,) = [t.seq for t in view.turns if t.text.startswith("Also:")]
    for _ in range(10):
        session.tools([120])
    session.user(6)
    for _ in range(12):
        session.tools([120])
        session.persist()
        view.ensure_budget()
    assert instruction not in {t.seq for t in view.turns}
    assert _anchors(view)[instruction] == "Also: never delete the raw files."
    text = view.index_text()
    assert (
        f"seq {instruction}  user: Also: never delete the raw files." in text
        or f'seq {instruction} "Also: never delete the raw files."' in text
    )


def test_a_large_eviction_lists_every_request_it_removes(view_log: EventLog) -> None:
    # Evicting far down (evict_to) puts dozens of exchanges into one tier-0 block; its lines
    # are merged to at most 8, but every request of the span stays listed with its seq.
    view = WorkingView(view_log, "s", "", budget_tokens=4000, evict_to=0.2, tail_groups=1)
    session = Session(view)
    requests: list[int] = []
    report = None
    while report is None or not report.evicted:
        session.user(4)
        session.reply(20)
        session.persist()
        requests.append(view.turns[-2].seq or 0)
        report = view.ensure_budget()
    (block,) = view.index.tiers[0]
    assert len(block.lines) == 8
    evicted = [seq for seq in requests if seq <= block.hi]
    assert len(evicted) > 16
    assert sorted(_anchors(view)) == evicted
    text = view.index_text()
    assert all(f"seq {seq} " in text for seq in evicted)


def test_metrics_record_each_eviction_and_every_call(view_log: EventLog) -> None:
    view = WorkingView(view_log, "s", "system", budget_tokens=3000, tail_groups=1)
    session = Session(view)
    sizes = []
    for _ in range(12):
        session.user(10)
        session.tools([200])
        session.reply(20, headline=False)
        session.persist()
        report = view.ensure_budget()
        sizes.append(view.build("openai").tokens)
        if report.changed:
            assert (view.metrics.tokens_before, view.metrics.tokens_after) == (
                report.tokens_before,
                report.tokens_after,
            )
            assert report.tokens_before > view.target >= report.tokens_after
    metrics = view.metrics.to_dict()
    assert metrics["evictions"] > 0 and metrics["folds"] > 0
    assert metrics["call_tokens"] == sizes and metrics["calls"] == 12
    assert metrics["total_input_tokens"] == sum(sizes) and metrics["max_view_tokens"] == max(sizes)
    # 12 tool-calling turns with a headline, 12 replies without one.
    assert metrics["headline_compliance"] == 0.5


def test_headline_compliance_is_the_share_of_responses_with_a_headline(
    view_log: EventLog,
) -> None:
    view = WorkingView(view_log, "s", "", budget_tokens=100_000)
    session = Session(view)
    session.user(5)
    session.reply(5, headline=True)
    session.reply(5, headline=False)
    session.reply(5, headline=False)
    assert (view.metrics.assistant_turns, view.metrics.headlined_turns) == (3, 1)
    assert view.metrics.headline_compliance == pytest.approx(1 / 3)


def test_the_index_counts_the_events_it_evicted(view_log: EventLog) -> None:
    # What the inspector shows as "events evicted": one per view event that entered the index.
    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    for _ in range(4):
        session.user(20)
        session.reply(40)
    session.persist()
    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0}
    evicting = WorkingView.restore(view_log, "s", "", budget_tokens=view.tokens - 10, **loose)
    report = evicting.ensure_budget()
    assert report.evicted_turns >= 2
    assert evicting.index_data()["counters"]["evicted_events"] == report.evicted_turns


def test_rows_without_a_headline_keep_a_persisted_extractive_label(fast_dir: Path) -> None:
    # #7837: every row without a headline (user rows included) carries a label written with
    # the row; the index uses it, and it survives reopening the file.
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        view = WorkingView(log, "s", "", budget_tokens=1000, tail_groups=0, keep_results=0)
        seqs = view.append({"role": "user", "content": "Compare the 2023 and 2024 budgets."})
        seqs += view.append({"role": "assistant", "content": "The 2024 budget is 12% higher."})
        seqs += view.append({"role": "user", "content": "Now write the report."})
        seqs += view.append({"role": "assistant", "content": text_of(900, 3)})
        seqs += view.append({"role": "user", "content": "Thanks."})
        assert view.ensure_budget().evicted
        text = view.index_text()
    with EventLog.open(path) as log:
        user, reply = log.events(seqs[:2])
    assert user.label == "Compare the 2023 and 2024 budgets."
    assert reply.headline is None and reply.label == "The 2024 budget is 12% higher."
    assert f"seq {user.seq}  user: {user.label}" in text
    assert f"seq {reply.seq}  {reply.label}" in text


def test_index_events_store_each_block_once_and_restore_exactly(view_log: EventLog) -> None:
    # Each index event describes the whole index, but a block an earlier event of the session
    # already holds is stored as a reference to it: the events stay small, restore is exact.
    view, _ = _long_session(view_log, 60, budget_tokens=4000, k=3)
    rows = view_log.execute(
        "SELECT seq, metadata FROM conversation_history WHERE kind = ? ORDER BY seq", (INDEX_KIND,)
    )
    inline = refs = 0
    for row in rows:
        for tier in json.loads(row["metadata"])["tiers"]:
            for block in tier["blocks"]:
                if STORED_AT in block:
                    refs += 1
                else:
                    inline += 1
    assert inline <= view.metrics.evictions + view.metrics.rollups < refs

    def load(seq: int) -> dict[str, Any]:
        return view_log.get(seq).metadata

    whole = [unpack(json.loads(row["metadata"]), row["seq"], load)[0] for row in rows]
    full = sum(len(json.dumps(data)) for data in whole)
    stored = sum(len(row["metadata"]) for row in rows)
    assert stored < full / 2
    _restored_equals(view, view_log)
    # A whole index written inline (older versions, an index handed over) restores as well.
    view_log.append(
        NewEvent(
            session_id="long",
            kind=INDEX_KIND,
            metadata=view.index.to_data(view.index_data()["view_state"])
            | {"counters": view.index_data()["counters"]},
            searchable=False,
        )
    )
    _restored_equals(view, view_log)


def test_folding_alone_writes_an_index_event_without_blocks(view_log: EventLog) -> None:
    from scrollctx.view import index_events

    view = WorkingView(view_log, "s", "", budget_tokens=1_000_000)
    session = Session(view)
    session.user(5)
    session.tools([400])
    session.reply(10)
    session.user(5)
    session.persist()
    loose = {"rho": 1.0, "tail_groups": 0, "keep_results": 0}
    budget = view.tokens - 50  # the one tool result's stub saves far more than 50 tokens
    report = WorkingView.restore(view_log, "s", budget_tokens=budget, **loose).ensure_budget()
    assert report.folded and not report.evicted and report.index_seq is not None
    event = view_log.get(report.index_seq)
    assert event.kind == INDEX_KIND and not event.searchable  # never a search hit
    assert event.content == "eviction index: 0 evictions, 0 blocks"  # what the inspector lists
    (listed,) = index_events(view_log, "s")
    assert (listed["seq"], listed["blocks"], listed["evictions"], listed["folds"]) == (
        report.index_seq,
        0,
        0,
        1,
    )


def test_an_index_reference_that_does_not_resolve_is_an_integrity_error(
    view_log: EventLog,
) -> None:
    from scrollctx.errors import IntegrityError

    view, _ = _long_session(view_log, 30, budget_tokens=4000, k=3)
    data = view.index_data()
    whole = view_log.append(NewEvent(session_id="other", kind=INDEX_KIND, metadata=data))
    for target in (1, whole):  # a user message; another session's index, which holds it
        data["tiers"][0]["blocks"][0] = {STORED_AT: [target, 0, 0]}
        seq = view_log.append(NewEvent(session_id="long", kind=INDEX_KIND, metadata=data))
        with pytest.raises(IntegrityError, match=f"eviction index at seq {seq} is malformed"):
            WorkingView.restore(view_log, "long", budget_tokens=4000)


def test_without_an_index_the_view_evicts_the_same_way_and_shows_no_index(
    view_log: EventLog,
) -> None:
    """The "Scroll w/o index" ablation: Algorithm 1 (persist, protect, fold, evict whole
    exchanges) with no index: no index message, no eviction_index event; the restore state
    goes to a view_state event whose spans carry no text, and a restart rebuilds the view."""
    view, session = _long_session(view_log, 60, budget_tokens=4000, k=4, with_index=False)
    check_invariants(view, view_log, session, None)
    check_provider_messages(view)
    assert view.metrics.evictions > 5 and view.metrics.folds > 10
    assert view.index_text() == ""
    assert all("[eviction index]" not in str(m["content"]) for m in view.render("openai"))
    kinds = {row["kind"] for row in view_log.execute("SELECT kind FROM conversation_history")}
    assert INDEX_KIND not in kinds and STATE_KIND in kinds
    assert all(line.text == "" for block in view.index.blocks() for line in block.lines)
    assert load_index(view_log, "long") is None  # what ms.index() reads
    _restored_equals(view, view_log)


def test_the_token_calibration_survives_a_restart(view_log: EventLog) -> None:
    """A view calibrated below 1 (the endpoint counts fewer tokens than the estimate) sits
    under its target; restored after a restart it counts the same and folds or evicts nothing,
    where an uncalibrated view over the same turns would."""
    view, session = _long_session(view_log, 12, budget_tokens=100_000)
    raw = view.build("openai").tokens
    view.observe_usage(int(raw * 0.6))
    view.budget_tokens = int(raw * 0.9 / view.rho)  # target: between 0.6x and 1x the estimate
    session.user(3)
    session.persist()
    assert not _acted(view.ensure_budget())
    settings = {"budget_tokens": view.budget_tokens, "rho": view.rho}
    with EventLog.open(view_log.path) as reopened:
        again = WorkingView.restore(reopened, view.session_id, view.system_prompt, **settings)
        assert again.counter.state() == view.counter.state()
        assert again.tokens == view.tokens
        assert not _acted(again.ensure_budget())
        fresh = WorkingView.restore(reopened, view.session_id, view.system_prompt, **settings)
        fresh.counter.restore({"ratio": 1.0, "samples": 1})  # as before: uncalibrated
        assert _acted(fresh.ensure_budget())


def _acted(report: Any) -> bool:
    return bool(report.folded or report.evicted)


def test_a_long_history_arriving_at_once_is_planned_in_few_renders(
    view_log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A proxy's first request of a conversation that began elsewhere brings its whole history
    # at once. Planning that eviction rendered and counted the growing index block once per
    # exchange it took (quadratic: 2,000 messages held the request for two minutes).
    from scrollctx.view import _working

    view = WorkingView(view_log, "arrived", "system prompt", budget_tokens=32_000)
    session = Session(view)
    for _ in range(300):
        session.user(60)
        session.reply(120)
    session.persist()
    renders: list[int] = []
    build = _working.build_block

    def counted(*args: Any) -> Any:
        renders.append(1)
        return build(*args)

    monkeypatch.setattr(_working, "build_block", counted)
    report = view.ensure_budget()
    assert report.evicted and view.tokens <= 32_000
    assert len(renders) < 30, len(renders)  # once per exchange: hundreds
