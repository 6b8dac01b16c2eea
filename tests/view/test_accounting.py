"""The view's incremental token accounting against a full recount, and the plan's index copy.

The view counts each turn once, when it arrives, and keeps running totals through folds,
evictions and index changes; an eviction plan works on a copy of the index that shares its
(frozen) blocks. These tests recount everything from scratch after many appends and
evictions, restore a second view from the log file to count it independently, and check that
a plan's copy never reaches back into the index it came from.
"""

from __future__ import annotations

import dataclasses

import pytest
from view_session import Session

from scrollctx.log import EventLog
from scrollctx.view import DIGEST_HEADER, EvictionIndex, IndexBlock, IndexLine, WorkingView
from scrollctx.view._eviction import fold_stub
from scrollctx.view.tokens import MESSAGE_OVERHEAD

_SYSTEM = "You are a test agent.\n⟦ headline | rules ⟧"


def full_recount(view: WorkingView) -> int:
    """The view's size counted from nothing: every part's text, each live turn as sent now."""
    counter = view.counter

    def message(text: str) -> int:
        return counter.raw(text) + MESSAGE_OVERHEAD if text else 0

    total = message(view.system_prompt) + message(view.index.render())
    total += message(DIGEST_HEADER + view.digest) if view.digest else 0
    for turn in view.turns:
        if turn.folded:
            total += message(fold_stub(turn))
        else:
            total += message(turn.text) + counter.raw(turn.structure_text())
    return counter.scale(total)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_counts_equal_a_full_recount_after_many_appends_and_evictions(
    view_log: EventLog, provider: str
) -> None:
    view = WorkingView(view_log, "s", _SYSTEM, budget_tokens=3_000, rho=0.8, k=3)
    session = Session(view, provider=provider)
    calls = 0
    for step in range(60):
        session.user(8 + step % 5)
        view.ensure_budget(digest=f"rows: list len={step}")
        view.persist()
        session.persist()
        view.build(provider)
        session.tools([40 + 7 * (step % 4), 12] if step % 3 else [90])
        session.reply(20, headline=step % 4 != 0)
        report = view.ensure_budget(digest=f"rows: list len={step}; batch: dict")
        view.persist()
        session.persist()
        calls += 2
        assert view.tokens == full_recount(view), f"step {step}"
        assert view.index_text() == view.index.render()
        assert view.build(provider).tokens == view.tokens
        if report.evicted:
            assert sum(view.part_tokens().values()) - view.tokens in range(-3, 4)
    assert view.metrics.evictions >= 30 and view.metrics.folds >= 40 and view.metrics.rollups >= 20
    # A second view rebuilt from the file alone counts the same (the digest is not logged).
    restored = WorkingView.restore(view_log, "s", _SYSTEM, budget_tokens=3_000, rho=0.8)
    restored.set_digest(view.digest)
    assert restored.tokens == view.tokens == full_recount(restored)


def _block(lo: int) -> IndexBlock:
    anchor = {"seq": lo, "text": f"request {lo}"}
    return IndexBlock(
        [
            IndexLine(lo, lo, "user", f"user: request {lo}", [anchor], 1),
            IndexLine(lo + 1, lo + 3, "turn", f"⟦ step {lo} | ok | next | done ⟧"),
        ]
    )


def test_a_plan_on_a_copy_leaves_the_index_it_came_from_unchanged() -> None:
    index = EvictionIndex(3, "s")
    for lo in range(1, 40, 4):
        index.add(_block(lo), 4)
    before_data, before_text = index.to_data(), index.render()
    plan = index.copy()
    for lo in range(41, 90, 4):  # enough to roll every tier up again
        plan.add(_block(lo), 4)
    assert plan.counters["rollups"] > index.counters["rollups"]
    assert index.to_data() == before_data and index.render() == before_text
    assert plan.to_data()["tiers"][0]["blocks"][-1]["lo"] == 89


def test_index_data_is_a_copy_and_lines_cannot_be_changed() -> None:
    index = EvictionIndex(3, "s")
    index.add(_block(1), 4)
    data = index.to_data()
    data["tiers"][0]["blocks"][0]["lines"][0]["anchors"][0]["text"] = "changed by a reader"
    assert index.to_data()["tiers"][0]["blocks"][0]["lines"][0]["anchors"][0]["text"] == (
        "request 1"
    )
    line = index.tiers[0][0].lines[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        line.text = "changed"  # type: ignore[misc]
