"""The semantic channel of ``ms.search``: modes, fusion, filters on both channels, fallbacks.

One small real store, embedded once per module with the real model (loaded once per session).
The pinned rankings (hits and order on fixed rows) are the contract the speed work keeps.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scrollctx.errors import QueryError
from scrollctx.log import EventLog, NewEvent
from scrollctx.surface import (
    Budgets,
    Encoder,
    MemorySurface,
    embed_pending,
    open_surface,
    pending_rows,
)

# (session, task, role, content): seqs 1.. in this order.
ROWS = [
    ("s1", "t1", "user", "I can't stand cilantro, it tastes like soap to me."),
    ("s1", "t1", "assistant", "Noted: no cilantro in any recipe I suggest."),
    ("s1", "t1", "user", "We adopted a rescue greyhound named Pixel last spring."),
    ("s1", "t1", "assistant", "Pixel sounds lovely; greyhounds like short sprints."),
    ("s2", "t2", "user", "The deploy failed because the TLS certificate expired."),
    ("s2", "t2", "assistant", "Renew the certificate with certbot, then restart nginx."),
    ("s2", "t2", "user", "Sprint planning moved to Thursday mornings at nine."),
    ("s2", "t2", "user", "My sister moved to Lisbon for a job at a bakery."),
    ("s3", "t2", "user", "Long notes. " + "Nothing relevant here at all. " * 44 + "The spare key "
     "is hidden under the third flowerpot by the shed."),
]  # fmt: skip


def _append(log: EventLog, rows: list[tuple[str, str, str, str]]) -> list[int]:
    return log.append_many(
        NewEvent(session_id=s, task_id=t, kind="conversation", role=r, content=c)
        for s, t, r, c in rows
    )


def _embedded_store(folder: Path, encoder: Encoder, rows: list[tuple[str, str, str, str]]) -> Path:
    path = folder / "history.db"
    with EventLog.open(path) as log:
        _append(log, rows)
        embed_pending(log, encoder)
    return path


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, semantic_encoder: Encoder) -> Path:
    path = tmp_path_factory.mktemp("semantic") / "history.db"
    with EventLog.open(path) as log:
        _append(log, ROWS)
        report = embed_pending(log, semantic_encoder, batch_rows=4)
    assert report.rows == len(ROWS) and report.through_seq == len(ROWS)
    assert report.vectors > len(ROWS)  # the long row has several windows
    return path


@pytest.fixture
def ms(embedded: Path) -> Iterator[MemorySurface]:
    surface = open_surface(embedded)
    yield surface
    surface.close()


def _seqs(hits: list[dict[str, object]]) -> list[object]:
    return [hit["seq"] for hit in hits]


def test_pinned_rankings_of_each_mode(ms: MemorySurface) -> None:
    pins = {
        "which herb do I dislike": ([], [1, 2, 9], [1, 2, 9]),
        "where did my sister move": ([8, 7], [8, 3, 7], [8, 7, 3]),
        "sprint": ([4, 7], [7, 4, 3], [4, 7, 3]),
        "the dog we adopted": ([3], [3, 4, 8], [3, 4, 8]),
    }
    for question, expected in pins.items():
        got = tuple(_seqs(ms.search(question, k=3, mode=m)) for m in ("bm25", "semantic", "hybrid"))
        assert got == expected, question
        assert _seqs(ms.search(question, k=3)) == expected[2]  # the default is hybrid


def test_every_hit_says_which_channel_found_it(ms: MemorySurface) -> None:
    hits = ms.search("sprint", k=3, mode="hybrid")
    assert {hit["seq"]: hit["channel"] for hit in hits} == {4: "both", 7: "both", 3: "semantic"}
    assert all(hit["broadened"] is False for hit in hits)
    assert {hit["channel"] for hit in ms.search("sprint", mode="bm25")} == {"bm25"}
    semantic = ms.search("cilantro soap", k=2, mode="semantic")
    assert {hit["channel"] for hit in semantic} == {"semantic"}
    assert "«cilantro»" in semantic[0]["snippet"]  # a semantic hit still shows its words


def test_a_window_past_the_first_256_word_pieces_is_found(ms: MemorySurface) -> None:
    hits = ms.search("where is the spare house key hidden", k=1, mode="semantic")
    assert _seqs(hits) == [9]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_filters_apply_to_both_channels(ms: MemorySurface, mode: str) -> None:
    question = "the dog we adopted"
    assert _seqs(ms.search(question, k=1, mode=mode)) == [3]
    checks: list[tuple[dict[str, object], object]] = [
        ({"role": "assistant"}, lambda h: h["role"] == "assistant"),
        ({"session_id": "s2"}, lambda h: h["session_id"] == "s2"),
        ({"seq_range": (5, 8)}, lambda h: 5 <= h["seq"] <= 8),
        ({"kind": "tool_result"}, lambda h: False),
    ]
    for filters, ok in checks:
        hits = ms.search(question, k=9, mode=mode, **filters)  # type: ignore[arg-type]
        assert hits or filters == {"kind": "tool_result"}
        assert all(ok(h) for h in hits), (filters, _seqs(hits))  # type: ignore[operator]
    bound = open_surface(ms._db_path, task_id="t2")  # noqa: SLF001 - same store, bound to t2
    try:
        hits = bound.search(question, k=9, mode=mode, scope="task")
        assert hits and all(h["seq"] >= 5 for h in hits)
    finally:
        bound.close()


def test_unknown_mode_is_a_query_error(ms: MemorySurface) -> None:
    with pytest.raises(QueryError, match="mode must be one of 'bm25', 'semantic', 'hybrid'"):
        ms.search("sprint", mode="dense")


def test_a_store_without_vectors_falls_back_to_bm25_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        _append(log, ROWS)
    with open_surface(path) as ms:
        for mode in ("semantic", "hybrid"):
            hits = ms.search("sprint planning", mode=mode)
            assert _seqs(hits) == [7, 4] and {h["channel"] for h in hits} == {"bm25"}
            assert any("no vectors for semantic search" in n for n in hits.notes)
            assert "scroll embed" in hits.notes[0]
        quiet = ms.search("sprint planning")
        assert _seqs(quiet) == [7, 4] and quiet.notes == []


def test_rows_newer_than_the_vectors_are_found_by_bm25_and_noted(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
    path = _embedded_store(tmp_path, semantic_encoder, ROWS[:4])
    with EventLog.open(path) as log:
        [late] = _append(log, [("s9", "t9", "user", "Quarterly tax filing is due in April.")])
        assert pending_rows(log, semantic_encoder.name) == 1
    with open_surface(path) as ms:
        hits = ms.search("tax filing", k=3, mode="hybrid")
        assert {h["seq"]: h["channel"] for h in hits}[late] == "bm25"
        assert any("covers rows up to seq 4; the 1 newer rows" in n for n in hits.notes)
        assert ms.search("tax filing", k=3).notes == []  # the default does not repeat it
    with EventLog.open(path) as log:
        again = embed_pending(log, semantic_encoder)
        assert (again.rows, again.through_seq) == (1, late)
        assert embed_pending(log, semantic_encoder).rows == 0
    with open_surface(path) as ms:
        hits = ms.search("tax filing", k=1)
        assert hits[0]["channel"] == "both" and hits.notes == []


def test_an_open_surface_tops_up_its_vectors_as_the_store_is_embedded(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
    path = _embedded_store(tmp_path, semantic_encoder, ROWS[:4])
    with open_surface(path) as ms:
        assert _seqs(ms.search("which herb do I dislike", k=2, mode="semantic")) == [1, 2]
        with EventLog.open(path) as log:
            _append(log, ROWS[4:])
            embed_pending(log, semantic_encoder)
        # The same surface, its matrix read before the rest was embedded: the new rows
        # (the long one's windows included) are ranked as in a freshly opened surface.
        assert _seqs(ms.search("where is the spare house key hidden", k=1, mode="semantic")) == [9]
        for question in ("which herb do I dislike", "where did my sister move", "sprint"):
            for mode in ("semantic", "hybrid"):
                with open_surface(path) as fresh:
                    expected = list(fresh.search(question, k=5, mode=mode))
                assert list(ms.search(question, k=5, mode=mode)) == expected, (question, mode)


@pytest.mark.parametrize(
    "question", ["sprint planning moved", "certificate nginx restart", "Pixel greyhound"]
)
def test_hybrid_lexical_hits_carry_the_snippet_of_their_bm25_pass(
    ms: MemorySurface, question: str
) -> None:
    # Each is the one BM25 mode computes for that row (from the strict or broadened pass),
    # however hybrid's BM25 half is run.
    lexical = {hit["seq"]: hit["snippet"] for hit in ms.search(question, k=50, mode="bm25")}
    hybrid = [
        hit for hit in ms.search(question, k=4, mode="hybrid") if hit["channel"] != "semantic"
    ]
    assert hybrid and all("«" in hit["snippet"] for hit in hybrid)
    assert {hit["seq"]: hit["snippet"] for hit in hybrid} == {
        hit["seq"]: lexical[hit["seq"]] for hit in hybrid
    }


def test_loading_the_vectors_is_not_charged_to_the_first_search(
    tmp_path: Path, semantic_encoder: Encoder
) -> None:
    import numpy as np

    path = tmp_path / "history.db"
    rng = np.random.default_rng(15)
    with EventLog.open(path) as log:
        seqs = _append(log, [("s1", "t1", "user", f"note number {i}") for i in range(3000)])
        vectors = rng.standard_normal((len(seqs), semantic_encoder.dim)).astype("<f2")
        rows = [(seq, 0, vector.tobytes()) for seq, vector in zip(seqs, vectors, strict=True)]
        log.append_embeddings(semantic_encoder.name, semantic_encoder.dim, seqs[-1], rows)
    # Reading 3,000 vectors outlasts this budget: charged to the search, it surfaced as a
    # raw SQLite "interrupted"; the search itself may still be cut, and then says so.
    with open_surface(path, budgets=Budgets(seconds=1e-9)) as ms:
        hits = ms.search("note", k=3, mode="semantic")
        assert len(hits) == 3 or (hits.partial and "time budget" in hits.notes[-1])


def test_a_row_scores_the_mean_of_its_window_products_read_slice_by_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from needs import import_or_missing

    np = import_or_missing("numpy")
    import_or_missing("threadpoolctl")
    from scrollctx.surface import _semantic_vectors as vectors

    dim, model = 8, "test-model"
    rng = np.random.default_rng(3)
    path = tmp_path / "history.db"
    with EventLog.open(path) as log:
        seqs = _append(log, [("s1", "t1", "user", f"note number {i}") for i in range(10)])
        windows = {seq: rng.standard_normal((1 + i % 3, dim)) for i, seq in enumerate(seqs)}
        rows = [(seq, j, w.astype("<f2").tobytes()) for seq, ws in windows.items()
                for j, w in enumerate(ws)]  # fmt: skip
        log.append_embeddings(model, dim, seqs[5], [r for r in rows if r[0] <= seqs[5]])
        log.append_embeddings(model, dim, seqs[-1], [r for r in rows if r[0] > seqs[5]])
    monkeypatch.setattr(vectors, "_SLICE_SEQS", 3)  # several slices per load, rows of 1-3 windows
    conn = sqlite3.connect(":memory:")
    conn.execute("ATTACH DATABASE ? AS hist", (str(path),))
    index = vectors.VectorIndex(conn, model)
    index.refresh(vectors.VectorState(seqs[5], seqs[-1], dim))
    index.refresh(vectors.VectorState(seqs[-1], seqs[-1], dim))  # the top-up
    query = rng.standard_normal(dim).astype(np.float32)
    halves = {seq: ws.astype("<f2").astype(np.float32) for seq, ws in windows.items()}
    expected = sorted(((seq, float(np.mean(ws @ query))) for seq, ws in halves.items()),
                      key=lambda pair: -pair[1])  # fmt: skip
    ranked = index.rank(query, None, k=len(seqs))
    conn.close()
    assert [seq for seq, _ in ranked] == [seq for seq, _ in expected]
    assert [score for _, score in ranked] == pytest.approx([s for _, s in expected], abs=1e-5)


_WITHOUT_ONNXRUNTIME = """
import sys
sys.modules["onnxruntime"] = None  # the semantic extra is not installed
from scrollctx.errors import MissingDependency
from scrollctx.surface import open_surface
ms = open_surface(sys.argv[1])
try:
    ms.search("sprint", mode="semantic")
except MissingDependency as exc:
    print("raised:", exc)
hits = ms.search("sprint planning")
print("default:", [h["seq"] for h in hits], [h["channel"] for h in hits])
print("notes:", hits.notes)
"""


def test_a_missing_extra_names_the_install_command(embedded: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ONNXRUNTIME, str(embedded)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (
        "raised: onnxruntime is not installed; install it with: pip install 'scrollctx[semantic]'"
        in out
    )
    assert "default: [7, 4] ['bm25', 'bm25']" in out
    assert "semantic search is unavailable" in out and "scrollctx[semantic]" in out
