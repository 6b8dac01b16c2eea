"""expand, session, sessions, recall_tool and index: full rows, payloads, budgets, contracts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollctx.errors import QueryError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Budgets, MemorySurface, open_surface


def _seqs(rows: list[dict[str, object]]) -> list[object]:
    return [row["seq"] for row in rows]


def test_expand_forms(ms: MemorySurface) -> None:
    assert _seqs(ms.expand([3, 1, 2])) == [1, 2, 3]
    assert _seqs(ms.expand(2, 4)) == [2, 3, 4]
    assert _seqs(ms.expand(4, 2)) == [2, 3, 4]
    assert _seqs(ms.expand(5)) == [5]
    assert _seqs(ms.expand(ms.search("car", k=2))) == [10, 11]
    assert _seqs(ms.expand({"seq": 7, "content": "…"})) == [7]
    assert ms.expand([]) == []


def test_expand_rows_are_full(ms: MemorySurface) -> None:
    row = ms.expand([12])[0]
    assert row["content"].endswith("THE END") and len(row["content"]) > 20000
    assert row["payload_missing"] is False
    assert row["metadata"] == {"date": "2024-05-01"}
    call, result = ms.expand(14, 15)
    assert call["tool_input"] == {"url": "x"} and result["content"] == "R" * 20000


def test_expand_reports_unknown_seqs(ms: MemorySurface) -> None:
    rows = ms.expand([1, 999, 1000])
    assert _seqs(rows) == [1]
    assert "no event at seq 999, 1000" in rows.notes[0]
    assert "no events between" in ms.expand(500, 600).notes[0]


@pytest.mark.parametrize(
    "bad,message",
    [
        ("12", r"expand takes a seq, a list of seqs, search hits, or \(lo, hi\); got str '12'"),
        (1.5, r"expand takes a seq, .*; got float 1.5"),
        ([1, "x"], r"expand: 'x' is not a seq or a row with a 'seq'"),
        ([{"no": 1}], r"expand: \{'no': 1\} is not a seq or a row with a 'seq'"),
        (None, r"expand takes a seq, .*; got NoneType None"),
        (True, r"expand takes a seq, .*; got bool True"),
    ],
)
def test_expand_rejects_what_is_not_a_seq(ms: MemorySurface, bad: object, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        ms.expand(bad)


def test_expand_span_needs_integers(ms: MemorySurface) -> None:
    with pytest.raises(QueryError, match=r"expand\(lo, hi\) takes two integer seqs; got '1', 5"):
        ms.expand("1", 5)  # type: ignore[arg-type]


def test_a_missing_payload_is_flagged_never_empty(own_store: Path) -> None:
    with EventLog.open(own_store) as log:
        event = log.get(12)
        assert event.payload_sha256 is not None
        log.payloads.path_for(event.payload_sha256).unlink()
    with open_surface(own_store) as ms:
        rows = ms.expand([11, 12])
        assert rows[0]["payload_missing"] is False
        assert rows[1]["payload_missing"] is True
        assert rows[1]["content"].startswith("The full travel log.")  # the stored preview
        assert any("seq 12" in n and "missing" in n and "preview" in n for n in rows.notes)
        assert ms.drain_notes() == rows.notes


def test_expand_span_is_bounded_by_the_row_budget(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(rows=4)) as ms:
        rows = ms.expand(1, 15)
        assert _seqs(rows) == [1, 2, 3, 4]
        assert rows.partial and "row budget" in rows.notes[0] and "seq 4" in rows.notes[0]


def test_expand_is_bounded_by_the_byte_budget(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(bytes=10_000)) as ms:
        rows = ms.expand(10, 15)
        assert _seqs(rows) == [10, 11]
        assert rows.partial and "byte budget" in rows.notes[0]


def test_sessions_lists_spans(ms: MemorySurface) -> None:
    rows = ms.sessions()
    assert [r["session_id"] for r in rows] == ["s1", "s2", "s3"]
    s2 = rows[1]
    assert (s2["events"], s2["first_seq"], s2["last_seq"]) == (5, 7, 11)
    assert (s2["first_step"], s2["last_step"], s2["task_id"]) == (1, 2, "t2")
    assert s2["first_created_at"].startswith("2024-04-01")


def test_session_reads_oldest_first_and_pages(store_path: Path) -> None:
    with open_surface(store_path, session_id="s1", budgets=Budgets(rows=4)) as ms:
        first = ms.session()
        assert _seqs(first) == [1, 2, 3, 4] and first.partial
        rest = ms.session("s1", after_seq=first[-1]["seq"])
        assert _seqs(rest) == [5, 6] and not rest.partial
        assert "no events" in ms.session("nope").notes[0]
    with open_surface(store_path) as unbound, pytest.raises(QueryError, match="ms.sessions"):
        unbound.session()


def test_recall_tool_returns_call_and_full_result(ms: MemorySurface) -> None:
    call, result = ms.recall_tool("call_1")
    assert call["kind"] == "tool_call" and result["content"] == "R" * 20000
    assert "no events with tool_call_id" in ms.recall_tool("call_404").notes[0]


def test_index_contract(own_store: Path) -> None:
    with open_surface(own_store, session_id="s1") as ms:
        assert ms.index() == {"tiers": []}
    first = {"tiers": [{"level": 0, "blocks": [{"lo": 1, "hi": 4, "headlines": ["a"]}]}]}
    latest = {"tiers": [{"level": 0, "blocks": [{"lo": 1, "hi": 6, "headlines": ["a", "b"]}]}]}
    with EventLog.open(own_store) as log:
        for meta in (first, latest):
            log.append(
                NewEvent(
                    session_id="s1",
                    kind="eviction_index",
                    content="index",
                    metadata=meta,
                    searchable=False,
                )
            )
        log.append(
            NewEvent(
                session_id="s2",
                kind="eviction_index",
                content="other",
                metadata={"tiers": ["other session"]},
                searchable=False,
            )
        )
    with open_surface(own_store, session_id="s1") as ms:
        assert ms.index() == latest
        assert ms.search("index", kind="eviction_index") == []  # not searchable
    with open_surface(own_store) as unbound:
        assert unbound.index() == {"tiers": []}
        assert unbound.index("s1") == latest  # any session's, by name
        assert unbound.index("s2") == {"tiers": ["other session"]}
