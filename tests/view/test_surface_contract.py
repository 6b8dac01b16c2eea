"""The contract with the memory surface: ms.index() is the view index; ms.expand recovers spans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scrollctx.log import EventLog
from scrollctx.surface import MemorySurface, open_surface
from scrollctx.view import WorkingView, simulate


def test_ms_index_and_expand_match_the_view(fast_dir: Path) -> None:
    path = fast_dir / "history.db"
    with EventLog.open(path) as log:
        simulate(log, steps=30, output_kb=1, budget=4000, k=3)
        view = WorkingView.restore(log, "simulation", budget_tokens=4000)
        data = view.index_data()
    with open_surface(path, session_id="simulation") as ms:
        _check(ms, data)
    with open_surface(path, session_id="nobody") as ms:
        assert ms.index() == {"tiers": []}


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
