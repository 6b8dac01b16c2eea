"""Restoring a view as it stood at a seq, and branching a session from there."""

from __future__ import annotations

from view_session import Session

from scrollctx.log import EventLog
from scrollctx.view import BRANCH_KEY, WorkingView, branch_view

SETTINGS = {"budget_tokens": 2_500, "rho": 0.8, "tail_groups": 1, "keep_results": 1}


def _long_session(log: EventLog, provider: str = "openai") -> Session:
    session = Session(WorkingView(log, "parent", "sys", **SETTINGS), provider=provider)
    for _ in range(12):
        session.user(20)
        session.tools([60, 60])
        session.reply(20)
        session.persist()
        session.view.ensure_budget()
    return session


def test_restore_before_the_next_seq_rebuilds_the_view_of_that_moment(view_log: EventLog) -> None:
    session = _long_session(view_log)
    view = session.view
    session.user(20)  # the moment: this request is logged, its eviction has not run yet
    session.persist()
    at = view.turns[-1].seq
    assert at is not None
    snapshot = view.render("openai")
    index_text = view.index_text()
    for _ in range(6):  # more turns and evictions after the moment
        session.user(20)
        session.tools([60])
        session.reply(20)
        session.persist()
        view.ensure_budget()
    assert view.render("openai") != snapshot
    then = WorkingView.restore(view_log, "parent", "sys", before_seq=at + 1, **SETTINGS)
    assert then.render("openai") == snapshot
    assert then.index_text() == index_text


def test_a_branch_shares_the_evicted_past_and_copies_the_live_tail(view_log: EventLog) -> None:
    session = _long_session(view_log)
    parent = session.view
    assert parent.index.block_count() > 0, "the scenario must have evicted something"
    before = view_log.count()
    parent_events = len(view_log.session_events("parent"))
    branch = branch_view(parent, "child", event_fields={"agent_id": "a1"})
    assert len(view_log.session_events("parent")) == parent_events  # the parent is untouched
    assert _turns(branch) == _turns(parent)
    assert branch.index_text() == parent.index_text()
    assert len(branch.render("anthropic")) == len(parent.render("anthropic"))
    events = view_log.session_events("child")
    assert events[0].metadata[BRANCH_KEY] == {
        "session_id": "parent",
        "seq": parent.turns[-1].seq,
    }
    copies = [e for e in events if "copy_of" in e.metadata]
    assert [e.metadata["copy_of"] for e in copies] == [t.seq for t in parent.turns]
    assert all(not e.searchable and e.agent_id == "a1" for e in copies)
    # bounded by the live view: far fewer events than the history holds
    assert view_log.count() - before < parent_events / 2
    # the index still points at the parent's seqs, which expand to the evicted turns
    lo, hi = branch.index.spans()[0]
    assert {e.session_id for e in view_log.span(lo, hi) if e.seq <= hi} >= {"parent"}


def test_a_branch_continues_on_its_own_and_restores(view_log: EventLog) -> None:
    session = _long_session(view_log, provider="anthropic")
    parent = session.view
    branch = branch_view(parent, "child")
    branch.append({"role": "user", "content": "a different question"}, provider="anthropic")
    assert parent.turns[-1].text != "a different question"
    restored = WorkingView.restore(view_log, "child", "sys", **SETTINGS)
    assert restored.render("anthropic") == branch.render("anthropic")
    assert restored.turns[-1].text == "a different question"


def test_folded_results_stay_folded_in_the_branch(view_log: EventLog) -> None:
    session = _long_session(view_log)
    parent = session.view
    folded = [t for t in parent.turns if t.folded]
    if not folded:  # force a fold of the oldest live result by asking for a small view
        parent.budget_tokens = parent.budget_tokens // 2
        parent.ensure_budget()
        folded = [t for t in parent.turns if t.folded]
    branch = branch_view(parent, "child")
    assert [t.folded for t in branch.turns] == [t.folded for t in parent.turns]
    stub = next(m for m in branch.render("openai") if "[tool output folded" in str(m))
    copy_seq = next(t.seq for t in branch.turns if t.folded)
    assert f"at seq {copy_seq};" in stub["content"]  # the copy holds the whole output
    assert view_log.full_text(view_log.get(copy_seq)) == folded[0].text


def test_a_branch_of_a_session_without_evictions_copies_every_turn(view_log: EventLog) -> None:
    view = WorkingView(view_log, "short", "sys", budget_tokens=50_000)
    view.append({"role": "user", "content": "hello"})
    view.append({"role": "assistant", "content": "hi"})
    branch = branch_view(view, "short-2")
    assert branch.render("openai") == view.render("openai")
    kinds = [e.kind for e in view_log.session_events("short-2")]
    assert "eviction_index" not in kinds


def _turns(view: WorkingView) -> list[tuple[str, str, bool, str | None]]:
    return [(t.role, t.text, t.folded, t.headline) for t in view.turns]
