"""The contract with the memory surface: ms.index() is the view index; ms.expand recovers spans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scrollctx.errors import IntegrityError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import MemorySurface, open_surface
from scrollctx.view import INDEX_KIND, WorkingView, load_index, simulate
from scrollctx.view._stored import STORED_AT


def _latest_stored(log: EventLog, session_id: str) -> dict[str, Any]:
    rows = log.execute(
        "SELECT metadata FROM conversation_history WHERE session_id = ? AND kind = ? "
        "ORDER BY seq DESC LIMIT 1",
        (session_id, INDEX_KIND),
    )
    data: dict[str, Any] = json.loads(rows[0]["metadata"])
    return data


def test_ms_index_and_expand_match_the_view(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        simulate(log, steps=30, output_kb=1, budget=4000, k=3)
        view = WorkingView.restore(log, "simulation", budget_tokens=4000)
        data = view.index_data()
        stored = _latest_stored(log, "simulation")
    # The latest event stores older blocks by reference; ms.index() resolves them.
    blocks = [b for tier in stored["tiers"] for b in tier["blocks"]]
    assert any(STORED_AT in b for b in blocks) and any(STORED_AT not in b for b in blocks)
    with open_surface(path, session_id="simulation") as ms:
        _check(ms, data)
    with open_surface(path, session_id="nobody") as ms:
        assert ms.index() == {"tiers": []}


def test_ms_index_leaves_a_reference_it_cannot_resolve_as_stored(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        simulate(log, steps=30, output_kb=1, budget=4000, k=3)
        other = _latest_stored(log, "simulation")
        (row,) = log.execute(
            "SELECT seq FROM conversation_history WHERE kind = ? ORDER BY seq DESC LIMIT 1",
            (INDEX_KIND,),
        )
        (inline,) = [
            [row["seq"], tier["tier"], position]
            for tier in other["tiers"]
            for position, block in enumerate(tier["blocks"])
            if STORED_AT not in block
        ]
        # Another session's index event may not lend its blocks to this one, and a seq that
        # holds no index event resolves to nothing.
        refs = [{STORED_AT: inline}, {STORED_AT: [999_999, 0, 0]}]
        forged = {**other, "tiers": [{"tier": 0, "blocks": refs}]}
        log.append(NewEvent(session_id="s2", kind=INDEX_KIND, metadata=forged, searchable=False))
    with open_surface(path, session_id="s2") as ms:
        assert ms.index()["tiers"] == forged["tiers"]


def _check(ms: MemorySurface, data: dict[str, Any]) -> None:
    assert ms.index() == data
    lo, hi = data["tiers"][-1]["blocks"][0]["lines"][0]["lo"], data["tiers"][0]["blocks"][-1]["hi"]
    rows = ms.expand(lo, hi)
    seqs = [row["seq"] for row in rows]
    assert seqs[0] == lo and seqs[-1] == hi
    folded = data["view_state"]["folded"]
    if folded:
        (row,) = ms.expand([folded[0]])
        assert row["content"].startswith("row 00000")


def test_load_index_resolves_references_only_to_index_events_of_the_same_session(
    fast_dir: Path,
) -> None:
    # A forged index of session s2 that points at an inline block of the simulation's latest
    # index event: another session's block does not resolve, nor does a same-session event
    # that is not an index event.
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        simulate(log, steps=30, output_kb=1, budget=4000, k=3)
        other = _latest_stored(log, "simulation")
        (row,) = log.execute(
            "SELECT seq FROM conversation_history WHERE kind = ? ORDER BY seq DESC LIMIT 1",
            (INDEX_KIND,),
        )
        (inline,) = [
            [row["seq"], tier["tier"], position]
            for tier in other["tiers"]
            for position, block in enumerate(tier["blocks"])
            if STORED_AT not in block
        ]
        plain = log.append(NewEvent(session_id="s2", kind="user_message", metadata=other))
        for where in (inline, [plain, inline[1], inline[2]]):
            forged = {**other, "tiers": [{"tier": 0, "blocks": [{STORED_AT: where}]}]}
            log.append(NewEvent(session_id="s2", kind=INDEX_KIND, metadata=forged))
            with pytest.raises(IntegrityError, match="malformed"):
                load_index(log, "s2")


def test_load_index_is_what_ms_index_returns(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        assert load_index(log, "simulation") is None
        simulate(log, steps=30, output_kb=1, budget=4000, k=3)
        data = load_index(log, "simulation")
        assert load_index(log=log, session_id="simulation", before_seq=None) == data  # by name
        log.append(
            NewEvent(
                session_id="bad",
                kind=INDEX_KIND,
                metadata={"tiers": [{"tier": 0, "blocks": [{STORED_AT: [1, 0, 0]}]}]},
            )
        )
        with pytest.raises(IntegrityError, match="malformed"):
            load_index(log, "bad")
    with open_surface(path, session_id="simulation") as ms:
        assert ms.index() == data
