"""When the OR pass runs, and what it may and may not do to the AND hits (real FTS5 stores).

Each test pins one promise of ``ms.search`` that a one-line change would break: an AND hit is
never pushed out by broadened rows; no OR pass runs once the AND pass filled k; a huge rarest
term still leaves candidates for the restricted OR pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scrollctx.log import EventLog, Kind, NewEvent
from scrollctx.surface import _broaden, open_surface
from scrollctx.surface._surface import recall, remembered

_FILLER = " ".join(f"filler{i}" for i in range(60))


def _store(path: Path, texts: list[str]) -> Path:
    with EventLog.open(path / "history.db") as log:
        log.append_many(
            NewEvent(session_id="s", kind=Kind.CONVERSATION, role="user", content=text)
            for text in texts
        )
    return path / "history.db"


def test_the_only_row_with_every_word_survives_a_crowd_of_better_or_rows(tmp_path: Path) -> None:
    # 16 short rows repeat one word each (high BM25 for an OR of the words); the one row that
    # holds both words is long, so the OR pass ranks it last. With k=3 it must still be kept.
    texts = [("alpha " if i % 2 else "beta ") * 3 for i in range(16)]
    texts.append(f"alpha {_FILLER} beta {_FILLER}")
    both = len(texts)  # its seq: rows are appended in order from 1
    with open_surface(_store(tmp_path, texts)) as ms:
        hits = ms.search("alpha beta", k=3)
    assert len(hits) == 3
    kept = {h["seq"]: h for h in hits}
    assert both in kept and not kept[both].get("broadened")
    assert sum(1 for h in hits if h.get("broadened")) == 2


def test_no_or_pass_runs_when_the_and_pass_filled_k(tmp_path: Path) -> None:
    texts = ["alpha beta one", "alpha beta two", "alpha only", "beta only"]
    db = _store(tmp_path, texts)
    statements: list[str] = []
    with open_surface(db) as ms:
        # The surface's own connection is private; watch the statements it runs through
        # SQLite's trace hook on that connection.
        ms._conn.set_trace_callback(statements.append)  # observing, not driving
        hits = ms.search("alpha beta", k=2)
    assert sorted(h["seq"] for h in hits) == [1, 2]
    assert not any(h.get("broadened") for h in hits)
    matches = [s for s in statements if "MATCH" in s and "count(*)" not in s]
    assert len(matches) == 1, matches


def test_a_rarest_term_over_the_candidate_budget_still_picks_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 120 rows (pruning applies from 100); 'alpha' in 20, 'beta' in 25, none with both. With a
    # candidate budget of 5 even the rarest term is over it; it must still be the candidate set.
    texts = [f"alpha row {i}" for i in range(20)] + [f"beta row {i}" for i in range(25)]
    texts += [f"other row {i}" for i in range(75)]
    monkeypatch.setattr(_broaden, "CANDIDATE_POSTINGS", 5)
    with open_surface(_store(tmp_path, texts)) as ms:
        hits = ms.search("alpha beta", k=5)
    assert len(hits) == 5
    assert all(h.get("broadened") for h in hits)
    assert all("alpha" in h["content"] for h in hits)


def test_trace_hook_sees_the_or_pass_when_it_is_needed(tmp_path: Path) -> None:
    # The counterpart of the test above it: the hook does see a second MATCH when the AND pass
    # comes up short, so "one MATCH" there is a real observation.
    db = _store(tmp_path, ["alpha beta one", "alpha only", "beta only"])
    statements: list[str] = []
    with open_surface(db) as ms:
        ms._conn.set_trace_callback(statements.append)
        hits = ms.search("alpha beta", k=3)
    assert len(hits) == 3
    assert len([s for s in statements if "MATCH" in s and "count(*)" not in s]) == 2


def test_term_counts_put_back_are_exactly_those_remembered(tmp_path: Path) -> None:
    # What a call answered ahead and then left unused must not leave behind (kernel/_ahead.py):
    # the OR pass's cached counts, put back as they were, across new counts and a refill.
    path = _store(tmp_path, [f"alpha beta {i}" for i in range(200)])
    with open_surface(path) as ms:
        ms.search("alpha beta", k=300)  # fewer AND hits than k: the OR pass counts its terms
        state = remembered(ms)
        counted = dict(state[0])
        ms.search("alpha gamma", k=300)  # one count more
        with EventLog.open(path) as log:  # more than 5% more rows: the next count refills
            log.append_many(NewEvent(session_id="s", kind=Kind.CONVERSATION, content=f"delta {i}")
                            for i in range(20))  # fmt: skip
        ms.search("delta beta", k=300)
        assert remembered(ms)[0] != counted
        recall(ms, state)
        counts, size, rows = remembered(ms)
        assert (counts, size, rows) == (counted, len(counted), state[2]) and counted
