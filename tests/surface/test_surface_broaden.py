"""The broadened pass: common terms are pruned or demoted by document frequency, exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import _broaden, open_surface
from scrollctx.surface._broaden import TermStats, broad_expression
from scrollctx.surface._guard import Deadline, connect_read_only
from scrollctx.surface._query import parse_query


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 300 rows: "common" in all, "frequent" in 1/3, "rare" in 3, "unique" in 1.
    path = tmp_path_factory.mktemp("broaden") / "history.db"
    events = []
    for i in range(300):
        words = ["common", "filler"]
        if i % 3 == 0:
            words.append("frequent")
        if i in (10, 20, 30):
            words.append("rare")
        if i == 20:
            words.append("unique")
        events.append(NewEvent(session_id="s", kind="conversation", content=" ".join(words)))
    with EventLog.open(path) as log:
        log.append_many(events)
    return path


@pytest.fixture
def stats(big_store: Path) -> Iterator[TermStats]:
    conn = connect_read_only(big_store, Deadline())
    yield TermStats(conn)
    conn.close()


def test_document_frequencies_are_counted(stats: TermStats) -> None:
    terms = parse_query("common frequent rare nothing").or_terms()
    assert [stats.df(t) for t in terms] == [300, 100, 3, 0]
    assert stats.rows() == 300


def test_terms_in_over_half_the_rows_leave_the_or_pass(stats: TermStats) -> None:
    assert broad_expression(parse_query("common rare nothing"), stats) == '"rare"'
    assert broad_expression(parse_query("common"), stats) == '"common"'  # one term: kept


def test_a_large_candidate_set_is_restricted_to_the_rarest_terms(
    big_store: Path, stats: TermStats, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_broaden, "CANDIDATE_POSTINGS", 50)
    with open_surface(big_store) as ms:
        expression = broad_expression(parse_query("frequent unique rare"), stats)
        assert expression == '("unique" OR "rare") AND ("unique" OR "rare" OR "frequent")'
        rows = ms.search("frequent unique rare missing", k=5)
        assert [r["seq"] for r in rows][0] == 21  # "unique" + "rare" + "frequent"
        assert all(r["broadened"] for r in rows)
        assert {r["seq"] for r in rows} == {11, 21, 31}  # rows with only "frequent" are out


def test_pruning_keeps_the_ranking_of_rare_terms(big_store: Path) -> None:
    with open_surface(big_store) as ms:
        rows = ms.search("common rare absent", k=3)
        assert {r["seq"] for r in rows} == {11, 21, 31}
