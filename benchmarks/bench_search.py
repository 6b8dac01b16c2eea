"""``ms.search`` CPU time against tantivy, bm25s and bare FTS5 on the same rows, in one run.

Run: ``.venv/bin/python benchmarks/bench_search.py [--scale ROWS] [--repeats 3] [--queries 200]
[--cache DIR] [--data DIR] [--skip NAME ...] [--save FILE | --expect FILE]``

1. The store (built once into ``--cache`` and reused; use a new folder after a schema change):
   every BEAM chat present (100K, 500K and the 1M chats that exist) in one store, about 60,000
   rows. With ``--scale N`` the chats are then ingested again under other chat ids (folders
   ``copyK-<tier>/<n>``, so other sessions and tasks) until the store holds N rows:
   ``--scale 200000`` is the BEAM-10M scale of issue 19.
2. The peers index the same rows: the text the FTS5 index holds for each searchable row
   (prose, code and headline, read back from the store's own view), one document per row.
   **tantivy**: one in-memory index, its ``en_stem`` analyzer (lower case, English stemmer),
   its BM25, the query's words OR-ed by its query parser, the ``seq`` of each hit read back.
   **bm25s**: its default BM25 over ``bm25s.tokenize`` (English stop words, Snowball stemmer),
   top k by ``retrieve``. Both are what a skilled user would set up first.
3. Queries: the first ``--queries`` BEAM probing questions (chats in numeric order, questions in
   file order), raw text; the peers get the question's words (letters and digits) lower-cased.
4. ``--repeats`` rounds. Each round opens a fresh surface (so term statistics are counted
   again, as in a new session) and runs every system on every query, in an order that rotates
   with the query and the round; each call is timed in CPU seconds (``time.process_time``):
   ``ms.search(q, k=10)`` (snippets on, 300 chars), ``tantivy``, ``bm25s``, ``bare AND`` and
   ``bare OR`` (every whitespace token quoted as an FTS5 string, joined by AND / OR, rank order,
   LIMIT 10: the floor and the naive query), and the cost of per-event checksums:
   ``ms.expand`` of the hits and both calls on a surface whose checks are switched off.
   Printed: each system's per-round medians (min / median / max over rounds), p95 over all
   calls, and each ratio computed per round (min / median / max).
5. ``--save FILE`` writes a digest of ``ms.search``'s whole result (rows, notes, flags) for
   every query in a dozen variants (k 3 / 10 / 50, snippets off, chars=None, role, kind with a
   seq range, one session, dates, task scope, a phrase, OR, NOT, a prefix); ``--expect FILE``
   recomputes them and exits 1 naming the queries whose results changed. Run ``--save`` with
   the old code (``PYTHONPATH=<old checkout>/src``) and ``--expect`` with the new: the proof
   that a speed-up changed no result.

Numbers only; nothing is asserted but ``--expect``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from _compare import cpu_seconds, load_average, p95, ratio_spread, rotated, spread

from scrollctx.ingest import ingest_path
from scrollctx.log import EventLog
from scrollctx.surface import Budgets, MemorySurface, open_surface

# Private on purpose: a surface without its checksum checks, to measure what they cost.
from scrollctx.surface._filters import Binding

SIZES = ("100K", "500K", "1M")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BARE_SQL = (
    "SELECT rowid FROM conversation_history_fts WHERE conversation_history_fts MATCH ? "
    "ORDER BY rank LIMIT 10"
)
_MARKER = "complete.json"
_WORD = re.compile(r"[^\W_]+")


def chat_folders(data: Path) -> list[Path]:
    """Return every BEAM chat folder, tiers in order, chats numerically."""
    folders = []
    for size in SIZES:
        found = [p for p in (data / "beam" / "chats" / size).iterdir() if p.is_dir()]
        folders += sorted(found, key=lambda p: int(p.name))
    return folders


def build_store(data: Path, cache: Path, scale: int = 0) -> dict[str, Any]:
    """Ingest every BEAM chat into ``cache`` (then copies, up to ``scale`` rows) unless built."""
    marker = cache / _MARKER
    if marker.is_file():
        return dict(json.loads(marker.read_text(encoding="utf-8")))
    if (cache / "history.db").exists():
        raise SystemExit(f"{cache} holds an unfinished build; remove it or pick another --cache")
    chats = [f / "chat.json" for f in chat_folders(data) if (f / "chat.json").is_file()]
    started = time.perf_counter()
    with EventLog.open(cache / "history.db") as log:
        for chat in _copies(chats, cache / "copies", scale, log.count):
            ingest_path(log, chat, format="beam")
        rows = log.count()
    info: dict[str, Any] = {
        "chats": len(chats),
        "rows": rows,
        "build_seconds": round(time.perf_counter() - started, 1),
        "db_bytes": (cache / "history.db").stat().st_size,
    }
    marker.write_text(json.dumps(info), encoding="utf-8")
    return info


def _copies(chats: list[Path], folder: Path, scale: int, rows: Callable[[], int]) -> Iterator[Path]:
    """Yield every chat, then links to them under new chat ids while the store is short."""
    yield from chats
    copy = 0
    while rows() < scale:
        copy += 1
        for chat in chats:
            if rows() >= scale:
                return
            link = folder / f"copy{copy}-{chat.parent.parent.name}" / chat.parent.name
            link.mkdir(parents=True, exist_ok=True)
            if not (link / "chat.json").exists():
                (link / "chat.json").symlink_to(chat.resolve())
            yield link / "chat.json"


def questions(data: Path, limit: int) -> list[str]:
    """Return the first ``limit`` BEAM probing questions in a fixed order."""
    return [q for q, _ in tasked_questions(data, limit)]


def tasked_questions(data: Path, limit: int) -> list[tuple[str, str]]:
    """Return the first ``limit`` BEAM probing questions with the task id of their chat."""
    found: list[tuple[str, str]] = []
    for folder in chat_folders(data):
        path = folder / "probing_questions" / "probing_questions.json"
        if not path.is_file():
            continue
        task = f"beam/{folder.parent.name}/{folder.name}"
        for items in json.loads(path.read_text(encoding="utf-8")).values():
            found += [(str(item["question"]), task) for item in items]
        if len(found) >= limit:
            break
    return found[:limit]


def bare_match(question: str, joiner: str) -> str:
    """Compile a question into FTS5: each whitespace token quoted, joined by ``joiner``."""
    tokens = ['"' + token.replace('"', '""') + '"' for token in question.split()]
    return f" {joiner} ".join(tokens)


def peer_words(question: str) -> str:
    """The question as the peers get it: its words, lower-cased, joined by spaces."""
    return " ".join(_WORD.findall(question.lower()))


def indexed_rows(db: Path) -> list[tuple[int, str]]:
    """Every searchable row's seq and the text its FTS5 row holds (prose, code, headline)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT seq, prose || ' ' || code || ' ' || headline FROM conversation_history_text "
            "ORDER BY seq"
        )
        return [(int(seq), str(text)) for seq, text in rows]
    finally:
        conn.close()


class Tantivy:
    """tantivy over the rows: ``en_stem`` analyzer, BM25, OR of the query's words."""

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
        builder.add_integer_field("seq", stored=True, indexed=False)
        self._index = tantivy.Index(builder.build())
        writer = self._index.writer(heap_size=256 * 1024 * 1024, num_threads=1)
        for seq, text in rows:
            writer.add_document(tantivy.Document(seq=seq, body=text))
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def search(self, question: str, k: int = 10) -> list[int]:
        """Return the seqs of the ``k`` best rows."""
        words = peer_words(question)
        if not words:
            return []
        query = self._index.parse_query(words, ["body"])
        hits = self._searcher.search(query, k).hits
        return [int(self._searcher.doc(address)["seq"][0]) for _, address in hits]


class BM25S:
    """bm25s over the rows: English stop words, Snowball stemmer, its default BM25."""

    def __init__(self, rows: list[tuple[int, str]]) -> None:
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self._seqs = [seq for seq, _ in rows]
        self._index = bm25s.BM25()
        self._index.index(self._tokens([text for _, text in rows]), show_progress=False)

    def _tokens(self, texts: list[str]) -> Any:
        return self._bm25s.tokenize(
            texts, stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )

    def search(self, question: str, k: int = 10) -> list[int]:
        """Return the seqs of the ``k`` best rows."""
        [terms] = self._tokens([question])
        known = [t for t in terms if t in self._index.vocab_dict]
        if not known:
            return []
        found, _ = self._index.retrieve([known], k=k, show_progress=False, n_threads=1)
        return [self._seqs[int(i)] for i in found[0]]


class UnverifiedSurface(MemorySurface):
    """``ms`` with its checksum checks switched off: the baseline of what the checks cost."""

    def _verify_row(self, row: dict[str, Any]) -> None:
        pass


def measure(
    db: Path, queries: list[str], repeats: int, skip: set[str]
) -> dict[str, list[list[float]]]:
    """Time every system on every query, ``repeats`` rounds; return per-round CPU seconds."""
    rows = indexed_rows(db)
    peers: dict[str, Any] = {}
    for name, build in (("tantivy", Tantivy), ("bm25s", BM25S)):
        if name not in skip:
            started = time.perf_counter()
            peers[name] = build(rows)
            print(f"{name} index built in {time.perf_counter() - started:.1f} s", flush=True)
    warm = open_surface(db)
    for question in queries:  # the page cache, for every system alike
        warm.search(question, k=10)
    warm.close()
    times: dict[str, list[list[float]]] = {}
    for turn in range(repeats):
        for name, values in one_round(db, queries, peers, turn, skip).items():
            times.setdefault(name, []).append(values)
        print(f"round {turn + 1}/{repeats} done; {load_average()}", flush=True)
    return times


def one_round(
    db: Path, queries: list[str], peers: dict[str, Any], turn: int, skip: set[str]
) -> dict[str, list[float]]:
    """One round: fresh surfaces, every system on every query in a rotating order."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    ms = open_surface(db)
    unverified = UnverifiedSurface(db, Binding(None, None, None), Budgets())
    hits: dict[str, Any] = {}

    def search(question: str) -> None:
        hits[question] = ms.search(question, k=10)

    runs: dict[str, Callable[[str], object]] = {
        "ms.search": search,
        "bare AND": lambda q: conn.execute(BARE_SQL, (bare_match(q, "AND"),)).fetchall(),
        "bare OR": lambda q: conn.execute(BARE_SQL, (bare_match(q, "OR"),)).fetchall(),
        "unverified search": lambda q: unverified.search(q, k=10),
        **{name: peer.search for name, peer in peers.items()},
    }
    runs = {name: run for name, run in runs.items() if name not in skip}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for index, question in enumerate(queries):
        for name in rotated(list(runs), turn + index):
            times[name].append(cpu_seconds(partial(runs[name], question)))
    for name, surface in (("ms.expand", ms), ("unverified expand", unverified)):
        times[name] = [cpu_seconds(partial(surface.expand, hits[q])) for q in queries]
    for closing in (ms, unverified, conn):
        closing.close()
    return times


def report(times: dict[str, list[list[float]]]) -> None:
    """Print each system's spread and each ratio to ms.search, round by round."""
    medians = {name: [statistics.median(r) for r in rounds] for name, rounds in times.items()}
    for name, rounds in times.items():
        every = [t for r in rounds for t in r]
        print(f"{name + ':':<19} medians {spread(medians[name])}   p95 {1000 * p95(every):.2f} ms")
    ours = medians["ms.search"]
    for name in ("tantivy", "bm25s", "bare AND", "bare OR"):
        if name in medians:
            ratios = [a / b for a, b in zip(ours, medians[name], strict=True)]
            print(f"ratio ms.search / {name}: {ratio_spread(ratios)}")
    for call in ("search", "expand"):
        checked, unchecked = medians[f"ms.{call}"], medians.get(f"unverified {call}")
        if unchecked:
            ratios = [a / b for a, b in zip(checked, unchecked, strict=True)]
            print(
                f"ratio ms.{call} / unverified {call} (the checksum checks): {ratio_spread(ratios)}"
            )


# -- proof of identical results -------------------------------------------------------------


def _words(question: str) -> list[str]:
    return [w for w in _WORD.findall(question) if len(w) > 3] or ["what"]


def variants(
    ms: MemorySurface, bound: MemorySurface, question: str, task: str
) -> Iterator[tuple[str, Callable[[], Any]]]:
    """Yield (name, call) for every variant of one question whose result is compared."""
    words = _words(question)
    rest = " ".join(words[2:])
    session = f"beam:{task.removeprefix('beam/')}:b1"
    yield "k10", lambda: ms.search(question, k=10)
    yield "k3", lambda: ms.search(question, k=3)
    yield "k50 plain", lambda: ms.search(question, k=50, snippet=False, chars=None)
    yield "role user", lambda: ms.search(question, k=10, role="user")
    yield (
        "kind seqs",
        lambda: ms.search(question, k=10, kind="conversation", seq_range=(1000, 40000)),
    )
    yield "session", lambda: ms.search(question, k=10, session_id=session)
    yield (
        "dates",
        lambda: ms.search(question, k=10, created_from="2024-01-01", created_to="2024-06-30"),
    )
    yield "task scope", lambda: bound.search(question, k=10, scope="task")
    yield "phrase", lambda: ms.search(f'"{" ".join(words[:2])}" {rest}', k=10)
    yield "or", lambda: ms.search(f"{words[0]} OR {words[-1]} {rest}", k=10)
    yield "not", lambda: ms.search(f"{question} NOT {words[0]}", k=10)
    yield "prefix", lambda: ms.search(f"{words[0][:4]}* {rest}", k=10)


def digest(result: Any) -> str:
    """A sha256 of a search result: every row, every note, the flags."""
    data = {"rows": list(result), "notes": result.notes, "partial": result.partial}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def results(db: Path, tasked: list[tuple[str, str]]) -> dict[str, list[Any]]:
    """Every variant's digest and seqs, per query."""
    found: dict[str, list[Any]] = {}
    ms = open_surface(db)
    bound: dict[str, MemorySurface] = {}
    for question, task in tasked:
        if task not in bound:
            bound[task] = open_surface(db, task_id=task)
        for name, call in variants(ms, bound[task], question, task):
            result = call()
            found.setdefault(name, []).append([digest(result), [r["seq"] for r in result]])
    for surface in (ms, *bound.values()):
        surface.close()
    return found


def compare(expected: dict[str, list[Any]], found: dict[str, list[Any]], queries: list[str]) -> int:
    """Print every changed result; return how many changed."""
    changed = 0
    for name, rows in expected.items():
        for index, (old, new) in enumerate(zip(rows, found.get(name, []), strict=False)):
            if old[0] != new[0]:
                changed += 1
                if changed <= 20:
                    print(f"CHANGED {name} q{index} {queries[index][:60]!r}: {old[1]} -> {new[1]}")
    return changed


def save_or_expect(
    args: argparse.Namespace, info: dict[str, Any], found: dict[str, list[Any]], queries: list[str]
) -> int:
    """Write ``found`` to ``--save``, or compare it with ``--expect``; the exit code (shared with
    bench_hybrid.py)."""
    if args.save:
        args.save.write_text(json.dumps({"store": info, "results": found}), encoding="utf-8")
        print(f"saved {sum(map(len, found.values()))} result digests to {args.save}")
        return 0
    expected = json.loads(args.expect.read_text(encoding="utf-8"))["results"]
    changed = compare(expected, found, queries)
    total = sum(map(len, expected.values()))
    print(f"{total - changed} of {total} results identical to {args.expect}")
    return 1 if changed else 0


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that pick the bench store and the questions (shared with bench_merge.py)."""
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--cache", type=Path, help="store cache folder (default by --scale)")
    parser.add_argument("--scale", type=int, default=0, help="ingest copies up to this many rows")
    parser.add_argument("--queries", type=int, default=200, help="how many questions to time")


def open_cache(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The store folder the options name, built when missing, and its build record."""
    cache: Path = args.cache or Path(f"/tmp/scroll-bench-search-{args.scale or 'beam'}")
    cache.mkdir(parents=True, exist_ok=True)
    return cache, build_store(args.data, cache, args.scale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    store_arguments(parser)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of every system")
    parser.add_argument("--skip", action="append", default=[], help="a system not to run")
    parser.add_argument("--save", type=Path, help="write the result digests here, then stop")
    parser.add_argument("--expect", type=Path, help="compare the results with a --save file")
    args = parser.parse_args(argv)
    cache, info = open_cache(args)
    db = cache / "history.db"
    tasked = tasked_questions(args.data, args.queries)
    queries = [q for q, _ in tasked]
    print(
        f"store: {info['chats']} BEAM chats, {info['rows']} rows, "
        f"{int(info['db_bytes']) / 1e6:.0f} MB (built in {info['build_seconds']} s); "
        f"{len(queries)} queries, k = 10; {load_average()}",
        flush=True,
    )
    if args.save or args.expect:
        return save_or_expect(args, info, results(db, tasked), queries)
    report(measure(db, queries, args.repeats, set(args.skip)))
    print(f"end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
