"""``scroll_search``'s ``mode`` reaches ``ms.search``: bm25, semantic and hybrid through a real
``scroll mcp`` over stdio rank exactly as the same calls in-process, on an embedded store."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_helpers import call, stdio_session, text

from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Encoder, embed_pending, open_surface

pytestmark = pytest.mark.anyio

ROWS = [
    ("user", "I can't stand cilantro, it tastes like soap to me."),
    ("assistant", "Noted: no cilantro in any recipe I suggest."),
    ("user", "We adopted a rescue greyhound named Pixel last spring."),
    ("assistant", "Pixel sounds lovely; greyhounds like short sprints."),
    ("user", "Sprint planning moved to Thursday mornings at nine."),
    ("user", "My sister moved to Lisbon for a job at a bakery."),
]
QUESTIONS = ("which herb do I dislike", "where did my sister move", "sprint")


@pytest.fixture
def embedded_store(tmp_path: Path, semantic_encoder: Encoder) -> Path:
    store = tmp_path / "store"
    with EventLog.open(store / "history.db") as log:
        log.append_many(
            NewEvent(session_id="s1", kind="conversation", role=role, content=content)
            for role, content in ROWS
        )
        assert embed_pending(log, semantic_encoder).rows == len(ROWS)
    return store


async def test_each_mode_ranks_as_ms_search_does(embedded_store: Path, tmp_path: Path) -> None:
    modes = ("bm25", "semantic", "hybrid")
    with open_surface(embedded_store / "history.db") as ms:
        expected = {
            (q, m): [(h["seq"], h["channel"]) for h in ms.search(q, k=3, mode=m)]
            for q in QUESTIONS
            for m in modes
        }
    # The modes disagree on these questions, so a mode the server dropped would show.
    assert all(len({tuple(expected[q, m]) for m in modes}) > 1 for q in QUESTIONS[1:])
    assert expected["which herb do I dislike", "bm25"] == []
    async with stdio_session(embedded_store, errlog=tmp_path / "err") as client:
        for (question, mode), ranked in expected.items():
            result = await call(client, "scroll_search", query=question, k=3, mode=mode)
            assert not result.is_error, text(result)
            hits = result.structured_content["hits"]
            assert [(h["seq"], h["channel"]) for h in hits] == ranked, (question, mode)
