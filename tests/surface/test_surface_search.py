"""ms.search on a real store: operators, broadening, filters, shaping, LIKE fallback, budgets."""

from __future__ import annotations

from pathlib import Path

import pytest
from surface_helpers import write_store

from scrollctx.errors import QueryError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import Budgets, MemorySurface, ResultRows, open_surface
from scrollctx.surface._rows import row_bytes


def _seqs(rows: ResultRows) -> list[int]:
    return [row["seq"] for row in rows]


def test_hit_has_the_documented_keys(ms: MemorySurface) -> None:
    hit = ms.search("sprint", k=1)[0]
    for key in (
        "seq",
        "session_id",
        "step_index",
        "msg_index",
        "kind",
        "role",
        "created_at",
        "date",
        "headline",
        "snippet",
        "content",
        "metadata",
        "broadened",
    ):
        assert key in hit
    assert hit["seq"] == 5 and hit["date"] == "2024-03-10"
    assert hit["metadata"] == {"date": "2024-03-10"}
    assert hit["headline"] == "Our sprint on 2024-11-05 logged 17 tasks."  # extractive label


def test_and_hits_come_first_then_broadened_or_hits(ms: MemorySurface) -> None:
    rows = ms.search("pamela vendor", k=5)
    strict = [r["seq"] for r in rows if not r["broadened"]]
    assert set(strict) == {1, 2}
    assert _seqs(rows)[:2] == strict
    broad = [r for r in rows if r["broadened"]]
    assert broad and all(
        ("pamela" in r["content"].lower()) or ("vendor" in r["content"].lower()) for r in broad
    )
    assert len(set(_seqs(rows))) == len(rows)


def test_no_broadening_when_the_and_pass_fills_k(ms: MemorySurface) -> None:
    rows = ms.search("pamela vendor", k=2)
    assert len(rows) == 2 and not any(r["broadened"] for r in rows)


def test_or_operator(ms: MemorySurface) -> None:
    rows = ms.search("Roadtrippers OR tolls", k=10)
    assert set(_seqs(rows)) == {7, 8, 9}
    assert not any(r["broadened"] for r in rows)


def test_paper_negation_query(ms: MemorySurface) -> None:
    rows = ms.search("Pamela didn't OR wasn't OR never OR not", k=3)
    assert _seqs(rows)[0] == 3 and not rows[0]["broadened"]


def test_not_operator(ms: MemorySurface) -> None:
    assert 2 not in _seqs(ms.search("pamela NOT handle", k=10))
    assert 2 in _seqs(ms.search("pamela handle", k=10))


def test_phrase_requires_adjacency(ms: MemorySurface) -> None:
    assert _seqs(ms.search('"red car"', k=10)) == [10]
    assert set(_seqs(ms.search("red car", k=2))) == {10, 11}


def test_prefix(ms: MemorySurface) -> None:
    assert set(_seqs(ms.search("Roadtrip*", k=10))) == {9}
    assert 9 not in _seqs(ms.search("Roadtrip", k=10))


def test_porter_stemming_matches_word_forms(ms: MemorySurface) -> None:
    assert 8 in _seqs(ms.search("planning", k=3))


@pytest.mark.parametrize(
    "query",
    [
        "didn't",
        "C++",
        "-",
        ":",
        "NEAR",
        "NEAR(a b)",
        "(x) OR (",
        "🙂",
        "🙂 tolls",
        "OR",
        "AND",
        "NOT",
        "tolls OR",
        "NOT NOT",
        '"unbalanced',
        '"',
        '""',
        "*",
        "a*b*",
        "col:tolls",
        "x" * 10000,
        "",
        "   ",
        "\x00tolls",
        "^tolls",
        "tolls + car",
        "{prose}: x",
        "'';--",
    ],
)
def test_hostile_queries_never_raise(ms: MemorySurface, query: str) -> None:
    rows = ms.search(query, k=3)
    assert isinstance(rows, ResultRows) and len(rows) <= 3


def test_hostile_queries_still_find_what_they_literally_say(ms: MemorySurface) -> None:
    assert _seqs(ms.search("didn't", k=1)) == [3]
    assert _seqs(ms.search("C++ templates", k=1)) == [6]
    assert _seqs(ms.search("std::vector", k=1)) == [6]
    assert set(_seqs(ms.search("🙂 tolls", k=2))) == {7, 8}
    hit = ms.search('"unbalanced sprint', k=1)[0]
    assert hit["seq"] == 5 and hit["broadened"]


def test_empty_query_lists_newest_rows_with_a_note(ms: MemorySurface) -> None:
    rows = ms.search("", k=2, kind="conversation")
    assert _seqs(rows) == [13, 12]
    assert "no searchable words" in rows.notes[0]


def test_natural_question_reaches_the_evidence(ms: MemorySurface) -> None:
    rows = ms.search("How many tasks did I log in the sprint?", k=3)
    assert rows[0]["seq"] == 5


def test_a_query_of_stopwords_only_is_searched_as_it_is(ms: MemorySurface) -> None:
    # With every word a stopword there is no broadened pass to run: the AND pass answers.
    rows = ms.search("the", k=20)
    assert {r["seq"] for r in rows} == {1, 4, 7, 10, 11, 12} and rows.notes == []
    assert not any(r["broadened"] for r in rows)


def test_k_must_be_positive(ms: MemorySurface) -> None:
    for bad in (0, -1, "3", True):
        message = f"k must be a positive integer, e.g. k=10; got {bad!r}$"
        with pytest.raises(QueryError, match=message):
            ms.search("tolls", k=bad)  # type: ignore[arg-type]


def test_chars_must_be_a_non_negative_integer_or_none(ms: MemorySurface) -> None:
    for bad in (-1, "300", 2.5, True):
        message = f"chars must be a non-negative integer or None; got {bad!r}$"
        with pytest.raises(QueryError, match=message):
            ms.search("tolls", chars=bad)  # type: ignore[arg-type]
    assert ms.search("tolls", k=1, chars=0)[0]["content"] is not None  # zero is allowed


# -- filters ------------------------------------------------------------------------------------


def test_kind_and_role_filters(ms: MemorySurface) -> None:
    assert set(_seqs(ms.search("tolls", role="assistant"))) == {8}
    assert _seqs(ms.search("fetch", kind="tool_call")) == [14]
    assert set(_seqs(ms.search("pamela", kind=["conversation"], role=["user"]))) == {1, 3}
    with pytest.raises(QueryError, match="kind= takes a string or a list of strings.*got 3"):
        ms.search("tolls", kind=3)  # type: ignore[arg-type]


def test_scope_uses_the_binding(store_path: Path) -> None:
    with open_surface(store_path, session_id="s1", task_id="t2") as bound:
        assert set(_seqs(bound.search("pamela OR tolls", scope="session"))) == {1, 2, 3}
        assert set(_seqs(bound.search("pamela OR tolls", scope="task"))) == {7, 8}
        assert set(_seqs(bound.search("pamela OR tolls", scope="all"))) == {1, 2, 3, 7, 8}
        with pytest.raises(QueryError, match="scope must be one of.*got 'everything'"):
            bound.search("x", scope="everything")


def test_unbound_scope_means_the_whole_store(ms: MemorySurface) -> None:
    assert _seqs(ms.search("pamela OR tolls", scope="task")) == _seqs(
        ms.search("pamela OR tolls", scope="all")
    )


def test_agent_binding_and_all_agents(store_path: Path) -> None:
    with open_surface(store_path, agent_id="a1") as ms:
        own = set(_seqs(ms.search("car OR tolls OR Roadtrippers OR pamela", k=20)))
        assert {7, 8, 1}.issubset(own)  # own rows and agent-less imported rows
        assert not own & {9, 10, 11}  # agent a2's rows
        every = set(_seqs(ms.search("car OR tolls OR Roadtrippers", k=20, all_agents=True)))
        assert {9, 10, 11}.issubset(every)


def test_session_and_range_filters(ms: MemorySurface) -> None:
    assert set(_seqs(ms.search("car", session_id="s2"))) == {10, 11}
    assert _seqs(ms.search("car", seq_range=(11, 11))) == [11]
    assert _seqs(ms.search("car", seq_range=(11, None))) == [11]
    assert set(_seqs(ms.search("pamela", step_range=(2, 2)))) == {3}
    shape = r"seq_range takes \(lo, hi\), both inclusive, e.g. seq_range=\(100, 250\); got "
    for bad, message in (
        ((1,), shape + r"\(1,\)"),
        ("1-2", shape + "'1-2'"),
        ((1, "x"), r"seq_range bounds must be integers or None; got \(1, 'x'\)"),
        (5, shape + "5"),
    ):
        with pytest.raises(QueryError, match=message):
            ms.search("car", seq_range=bad)  # type: ignore[arg-type]


def test_created_filters_are_inclusive(ms: MemorySurface) -> None:
    rows = ms.search("car", created_from="2024-04-21", created_to="2024-04-21")
    assert _seqs(rows) == [10]
    assert set(_seqs(ms.search("car", created_to="2024-04-22"))) == {10, 11}
    with pytest.raises(QueryError, match="created_from takes an ISO date.*got 'last week'"):
        ms.search("car", created_from="last week")


# -- shaping ------------------------------------------------------------------------------------


def test_snippet_marks_matches(ms: MemorySurface) -> None:
    hit = ms.search("tolls", role="user")[0]
    assert "«tolls»" in hit["snippet"]


def test_content_is_cut_at_chars_with_a_pointer_to_expand(ms: MemorySurface) -> None:
    hit = ms.search("templates", chars=10)[0]
    assert hit["content"].startswith("I write C+")
    assert "chars hidden" in hit["content"] and "ms.expand([6])" in hit["content"]
    full = ms.search("templates", chars=None)[0]
    assert full["content"] == "I write C++ templates and use std::vector."


def test_snippet_false_gives_an_empty_snippet(ms: MemorySurface) -> None:
    hit = ms.search("templates", snippet=False)[0]
    assert hit["snippet"] == "" and hit["content"].startswith("I write")


def test_externalized_rows_show_their_preview(ms: MemorySurface) -> None:
    hit = ms.search("Marseille", k=1, chars=None)[0]
    assert hit["seq"] == 12 and "externalized" in hit["content"]


# -- notes and budgets --------------------------------------------------------------------------


def test_notes_collect_until_drained(ms: MemorySurface) -> None:
    ms.search("")
    ms.search("x" * 5000)
    notes = ms.drain_notes()
    assert len(notes) == 2 and "4000" in notes[1]
    assert ms.drain_notes() == []


def test_time_budget_cut_is_partial_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        log.append_many(
            NewEvent(session_id="s", kind="conversation", content=f"filler words {i} and more")
            for i in range(3000)
        )
    with open_surface(path, budgets=Budgets(seconds=1e-9)) as ms:
        rows = ms.search("filler words", k=5)
        assert rows == [] and rows.partial
        assert any("time budget" in note for note in rows.notes)
    with open_surface(path) as ms:
        assert len(ms.search("filler words", k=5)) == 5


def test_k_above_the_row_budget_is_capped_with_a_note(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(rows=2)) as ms:
        rows = ms.search("car OR tolls OR pamela", k=50)
        assert len(rows) == 2 and rows.partial and "row budget" in rows.notes[0]
        at_budget = ms.search("car OR tolls OR pamela", k=2)  # k equal to the budget: no cap
        assert len(at_budget) == 2 and not at_budget.partial and at_budget.notes == []


def test_byte_budget_cut_is_partial(store_path: Path) -> None:
    with open_surface(store_path, budgets=Budgets(bytes=600)) as ms:
        rows = ms.search("car OR tolls OR pamela", k=10, chars=None)
        assert rows.partial and "byte budget" in rows.notes[-1]
        assert 0 < len(rows) < 7


def test_a_result_of_exactly_the_byte_budget_is_whole(store_path: Path) -> None:
    query = {"query": "car OR tolls OR pamela", "k": 5, "chars": None}
    with open_surface(store_path) as ms:
        whole = ms.search(**query)
    size = sum(row_bytes(row) for row in whole)  # what the byte budget counts
    with open_surface(store_path, budgets=Budgets(bytes=size)) as ms:
        exactly = ms.search(**query)
        assert _seqs(exactly) == _seqs(whole) and not exactly.partial
    with open_surface(store_path, budgets=Budgets(bytes=size - 1)) as ms:
        short = ms.search(**query)
        assert short.partial and _seqs(short) == _seqs(whole)[:-1]


# -- no FTS5 ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def like_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("like"), fts5=False)


def test_like_fallback_says_so_in_every_result(like_store: Path) -> None:
    with open_surface(like_store) as ms:
        assert not ms.has_fts5
        for query in ("pamela vendor", "nothing-matches-this", "", "C++", '"red car"'):
            rows = ms.search(query, k=3)
            assert any("LIKE" in note for note in rows.notes), query


def test_like_fallback_finds_and_broadens(like_store: Path) -> None:
    with open_surface(like_store) as ms:
        rows = ms.search("pamela vendor", k=4)
        assert {r["seq"] for r in rows if not r["broadened"]} == {1, 2}
        assert len(rows) == 4  # the broadened rows fill k, and no more
        assert any(r["broadened"] for r in rows)
        assert _seqs(ms.search("C++", k=1)) == [6]
        assert _seqs(ms.search('"red car"', k=5)) == [10]
        assert ms.search("100%_done", k=3) == []


def test_like_mode_ignores_punctuation_at_a_words_edge_as_fts5_does(
    store_path: Path, like_store: Path
) -> None:
    for path in (store_path, like_store):
        with open_surface(path) as ms:
            rows = ms.search("vendor.", k=5)
            assert {r["seq"] for r in rows} == {1, 2, 13}, path
            assert not any(r["broadened"] for r in rows), path  # the strict pass found them
            hit = ms.search("(Marseille,", k=1)[0]
            assert hit["seq"] == 12 and "«Marseille»" in hit["snippet"], path


def test_like_snippet_of_a_headline_match_is_the_start_of_the_content(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path, fts5=False) as log:
        log.append(
            NewEvent(session_id="s", kind="model_turn", content="plain words", headline="zephyr")
        )
    with open_surface(path) as ms:
        assert ms.search("zephyr", k=1)[0]["snippet"] == "plain words"


def test_like_snippet_is_200_characters_a_third_of_them_before_the_match(tmp_path: Path) -> None:
    text = " ".join(f"w{i:04d}" for i in range(100))  # word i starts at character 6 * i
    path = tmp_path / "history.db"
    with EventLog.open(path, fts5=False) as log:
        log.append(NewEvent(session_id="s", kind="conversation", content=text))
        log.append(NewEvent(session_id="short", kind="conversation", content=text[:200]))

    def snippet(word: str, session: str = "s") -> str:
        with open_surface(path) as ms:
            shown = ms.search(word, k=1, session_id=session)[0]["snippet"]
        assert f"«{word.split()[0]}»" in shown
        return str(shown).replace("«", "").replace("»", "")

    assert snippet("w0050") == "…" + text[300 - 66 : 300 - 66 + 200] + "…"
    assert snippet("w0001") == text[:200] + "…"  # no room before: the window starts at 0
    assert snippet("w0095") == "…" + text[570 - 66 :]  # it reaches the end: no ellipsis
    assert snippet("w0001", "short") == text[:200]  # 200 characters in all: none cut
    assert snippet("w0050 zyzzyva") == snippet("w0050")  # a word the row lacks moves nothing


def test_like_snippet_marks_the_longer_of_two_overlapping_words_whole(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path, fts5=False) as log:
        log.append(NewEvent(session_id="s", kind="conversation", content="the carpool car"))
    with open_surface(path) as ms:
        assert ms.search("car carpool", k=1)[0]["snippet"] == "the «carpool» «car»"


def test_like_snippet_centres_on_the_match(like_store: Path) -> None:
    with open_surface(like_store) as ms:
        hit = ms.search("Marseille", k=1)[0]
        assert hit["seq"] == 12 and "«Marseille»" in hit["snippet"]
        assert len(hit["snippet"].replace("«", "").replace("»", "")) <= 202
        assert "«C++»" in ms.search("C++", k=1)[0]["snippet"]


@pytest.fixture(scope="module")
def ranking_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ranking") / "history.db"
    filler = " ".join(f"word{i}" for i in range(60))
    contents = [f"alpha zeta {filler}", "zeta zeta zeta"]
    contents += [f"alpha common text {i}" for i in range(28)]
    with EventLog.open(path) as log:
        log.append_many(NewEvent(session_id="s", kind="conversation", content=c) for c in contents)
    return path


def test_plain_words_rank_strict_and_broadened_rows_together(ranking_store: Path) -> None:
    with open_surface(ranking_store) as ms:
        rows = ms.search("alpha zeta", k=3)
        assert [(r["seq"], r["broadened"]) for r in rows[:2]] == [(2, True), (1, False)]


def test_explicit_operators_keep_strict_hits_first(ranking_store: Path) -> None:
    with open_surface(ranking_store) as ms:
        rows = ms.search("alpha AND zeta", k=3)
        assert [(r["seq"], r["broadened"]) for r in rows[:2]] == [(1, False), (2, True)]
        assert len(rows) == 3  # the broadened rows fill k, and no more


def test_strict_hits_are_never_dropped_by_the_merge(ranking_store: Path) -> None:
    with open_surface(ranking_store) as ms:
        rows = ms.search("alpha zeta", k=1)
        assert [r["seq"] for r in rows] == [1]  # the AND pass filled k: no OR pass
        rows = ms.search("alpha zeta", k=2)
        assert {r["seq"] for r in rows} == {1, 2}


# -- rows appended one at a time and rows ingested in batches -----------------------------------


@pytest.mark.parametrize("fts5", [True, False], ids=["fts5", "like"])
def test_search_finds_single_appends_and_ingested_batches_alike(tmp_path: Path, fts5: bool) -> None:
    from scrollctx.ingest import ingest_path

    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        '{"role": "user", "content": "The quokka photo is from Rottnest."}\n'
        '{"role": "assistant", "content": "Lovely island."}\n',
        encoding="utf-8",
    )
    path = tmp_path / "history.db"
    with EventLog.open(path, fts5=fts5) as log:
        log.append(NewEvent(session_id="agent", kind="system", content="store opened"))
        with open_surface(path) as ms:
            ingest_path(log, chat, batch_size=1)  # every turn its own batch
            one = log.append(
                NewEvent(session_id="agent", kind="model_turn", content="Booked the wombat tour.")
            )
            code = log.append(
                NewEvent(
                    session_id="agent",
                    kind="tool_call",
                    content="Run it:\n```python\nplatypus_count = 3\n```",
                )
            )
            big = log.append(
                NewEvent(
                    session_id="agent",
                    kind="tool_result",
                    content="echidna sighting\n" + "x" * 20_000,
                )
            )
            log.append(
                NewEvent(session_id="agent", kind="tool_result", content="wombat", searchable=False)
            )
            assert _seqs(ms.search("quokka")) == [2]
            assert _seqs(ms.search("wombat tour")) == [one]
            assert _seqs(ms.search("platypus_count")) == [code]
            assert _seqs(ms.search("echidna")) == [big]
            assert _seqs(ms.search("wombat")) == [one]  # the unsearchable echo stays out
            assert ms.search("quokka")[0]["content"].endswith(
                "user: The quokka photo is from Rottnest."
            )


def test_column_weights_rank_headline_over_prose_over_code(tmp_path: Path) -> None:
    filler = "plain words about nothing much"
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        code = log.append(
            NewEvent(session_id="s", kind="model_turn", content=f"{filler}\n```\nzephyr = 1\n```")
        )
        prose = log.append(NewEvent(session_id="s", kind="model_turn", content=f"zephyr {filler}"))
        headline = log.append(
            NewEvent(session_id="s", kind="model_turn", content=filler, headline="zephyr notes")
        )
        for i in range(20):  # enough rows for bm25's idf to stay positive
            log.append(NewEvent(session_id="s", kind="model_turn", content=f"{filler} {i}"))
    with open_surface(path) as ms:
        assert _seqs(ms.search("zephyr", k=3)) == [headline, prose, code]
