"""ms.sql_query: one read-only statement, the 1000-row cap, budgets and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollctx.errors import IntegrityError, QueryError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Budgets, MemorySurface, format_notes, open_surface

CAP_NOTE = (
    "[note] sql_query hit the 1000-row cap -- matching rows beyond the first 1000 were NOT "
    "returned; narrow with WHERE or page with LIMIT/OFFSET"
)
COUNT_TO = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {}) "


def test_rows_are_dicts_with_column_names(ms: MemorySurface) -> None:
    rows = ms.sql_query(
        "SELECT seq, role, content FROM hist.conversation_history "
        "WHERE kind = 'conversation' AND step_index = 2 ORDER BY seq"
    )
    assert [r["seq"] for r in rows] == [3, 4, 9, 10, 11]
    assert set(rows[0]) == {"seq", "role", "content"}
    assert not rows.truncated and not rows.partial and rows.notes == []


def test_params_as_tuple_or_dict(ms: MemorySurface) -> None:
    by_position = ms.sql_query("SELECT content FROM hist.conversation_history WHERE seq=?", (5,))
    by_name = ms.sql_query("SELECT content FROM hist.conversation_history WHERE seq=:s", {"s": 5})
    assert by_position == by_name and "sprint" in by_position[0]["content"]


def test_the_cap_truncates_flags_and_notes(ms: MemorySurface) -> None:
    rows = ms.sql_query(COUNT_TO.format(1500) + "SELECT i FROM n")
    assert len(rows) == 1000 and rows[-1]["i"] == 1000
    assert rows.truncated and rows.partial
    assert format_notes(rows.notes) == CAP_NOTE
    exact = ms.sql_query(COUNT_TO.format(1000) + "SELECT i FROM n")
    assert len(exact) == 1000 and not exact.truncated and exact.notes == []


def test_paging_with_limit_offset_reaches_every_row(ms: MemorySurface) -> None:
    query = COUNT_TO.format(2500) + "SELECT i FROM n LIMIT 1000 OFFSET ?"
    seen = [r["i"] for offset in (0, 1000, 2000) for r in ms.sql_query(query, (offset,))]
    assert seen == list(range(1, 2501))


def test_a_runaway_query_hits_the_time_budget(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(seconds=0.2)) as ms:
        rows = ms.sql_query(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
            "SELECT count(*) AS c FROM n"
        )
        assert rows == [] and rows.partial
        assert "time budget" in rows.notes[0] and "partial" in rows.notes[0]
        assert ms.sql_query("SELECT 1 AS one") == [{"one": 1}]  # the surface still works


def test_the_byte_budget_cuts_with_a_note(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(bytes=3_000)) as ms:
        rows = ms.sql_query("SELECT seq, content FROM hist.conversation_history ORDER BY seq")
        assert rows.partial and 0 < len(rows) < 15
        assert "byte budget" in rows.notes[0] and "LIMIT/OFFSET" in rows.notes[0]


@pytest.mark.parametrize(
    ("sql", "params", "fragment"),
    [
        ("SELECT * FROM hist.nope", None, "no such table: hist.nope"),
        ("SELEC 1", None, "'SELEC' does not start an SQL statement"),
        ("SELEC 1", None, "did you mean SELECT?"),
        ("DELETE FROM hist.conversation_history", None, "read-only"),
        ("SELECT * FROM events", None, "the events are in hist.conversation_history"),
        ("SELECT ?", (1, 2), "parameters"),
        ("SELECT 1", 5, "params must be"),
        ("", None, "one SQL statement"),
        (None, None, "one SQL statement"),
    ],
)
def test_errors_name_the_problem_and_the_query(
    ms: MemorySurface, sql: object, params: object, fragment: str
) -> None:
    with pytest.raises(QueryError) as info:
        ms.sql_query(sql, params)  # type: ignore[arg-type]
    assert fragment in str(info.value)
    if sql:
        assert str(sql) in str(info.value)


def test_a_damaged_store_is_an_integrity_error_not_a_query_error(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        log.append_many(
            NewEvent(session_id="s", kind="conversation", content=f"row-{i:05d} " + "w" * 300)
            for i in range(2000)
        )
    data = bytearray(path.read_bytes())
    page = 4096
    start = data.index(b"row-01000 ") // page * page  # a leaf page of the log table itself
    data[start : start + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    with open_surface(path) as ms:
        with pytest.raises(IntegrityError, match="is damaged") as info:
            ms.sql_query("SELECT count(*), sum(length(content)) FROM hist.conversation_history")
        assert not isinstance(info.value, QueryError)
        with pytest.raises(IntegrityError, match="is damaged"):
            ms.expand(1, 2000)
