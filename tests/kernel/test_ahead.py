"""A cell's first ``ms`` call, answered ahead (:mod:`scrollctx.kernel._ahead`).

The host reads a literal first call off the cell's text and the memory reader runs it while the
worker starts the cell; the call then gets that answer only if it is exactly what it would get.
Each rule is shown on its own: what is read off a cell (pure), then, with real worker and reader
processes, the answer used, a commit before the call, a different call, an answer that goes on
as the call once its request has come, one given up because it has not, the off switch, and a
worker that tries to ask ahead itself. ``AheadCounts`` (read from the reader's call clock) says
what happened; the rows say that what the cell got is right.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernel_helpers import WORKER, channel_in_use

from scrollctx.config import resolve_config
from scrollctx.kernel import CellResult, Kernel, MemoryReader, ReaderLimits
from scrollctx.kernel._ahead import MAX_SOURCE, call_key, first_ms_call
from scrollctx.kernel._reader_host import AheadCounts
from scrollctx.log import EventLog, Kind, NewEvent, open_store
from scrollctx.surface import open_surface

_SLOW = 'ms.search("alpha", k=3)'
"""A search SQLite spends tens of ms on, once :func:`_grow` has run."""


def _grow(log: EventLog) -> None:
    # 30,000 events that all match _SLOW: its full-text statement runs for tens of ms.
    log.append_many(
        NewEvent(session_id="k1", kind=Kind.CONVERSATION, role="user",
                 content=f"alpha beta gamma delta number {i} " * 4)
        for i in range(30_000)
    )  # fmt: skip


def _since(reader: MemoryReader, before: AheadCounts) -> AheadCounts:
    now = reader.ahead_counts
    return AheadCounts(*(a - b for a, b in zip(now, before, strict=True)))


def _counted(kernel: Kernel, reader: MemoryReader, cell: str) -> tuple[CellResult, AheadCounts]:
    """Run ``cell``; return its result and what it cost in guesses (run, used, cut)."""
    before = reader.ahead_counts
    result = kernel.run_cell(cell)
    return result, _since(reader, before)


@dataclass
class _Watched:
    """The reader a host tool waits on, and its counts before the cell (set once it runs)."""

    reader: MemoryReader | None = None
    before: AheadCounts = AheadCounts(0, 0, 0)

    def wait(self, passed: Callable[[AheadCounts], bool]) -> None:
        """Return once the counts since the cell began pass the test."""
        reader = self.reader
        assert reader is not None and _wait_until(lambda: passed(_since(reader, self.before)))


def _wait_until(condition: Callable[[], bool]) -> bool:
    # The condition is the reader's own state in shared memory: polled, with a generous end.
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _rows(log: EventLog, call: Callable[..., object]) -> str:
    with open_surface(log.path, session_id="k1") as ms:
        return f"{list(call(ms))}\n"  # type: ignore[call-overload]


# -- what is read off a cell -----------------------------------------------------------------


def test_a_literal_call_is_read_as_the_worker_s_ms_would_send_it() -> None:
    request = first_ms_call('t = 1\nrows = ms.search("adoption agencies", k=3)\nprint(rows)')
    assert request is not None and request["method"] == "search"
    kwargs = request["kwargs"]
    assert (kwargs["query"], kwargs["k"], kwargs["scope"], kwargs["chars"]) == (
        "adoption agencies", 3, "all", 300)  # fmt: skip
    assert first_ms_call("ms.sessions(all_agents=True)") == {
        "method": "sessions", "kwargs": {"all_agents": True}}  # fmt: skip


def test_the_first_call_in_the_text_is_the_one_read() -> None:
    assert first_ms_call("print(ms.search('a'))\nms.expand(3)")["method"] == "search"  # type: ignore[index]
    read = first_ms_call("x = (ms.index(), ms.search('b'))")
    assert read is not None and read["method"] == "index"
    assert first_ms_call("x = (ms.expand(1), ms.search('b'))") is None  # expand comes first
    # a comprehension's first iterable runs at once, as the statement does
    read = first_ms_call("print([r['seq'] for r in ms.search('c')])")
    assert read is not None and read["kwargs"]["query"] == "c"


@pytest.mark.parametrize(
    "cell",
    [
        "rows = ms.search(question)",  # a name: the cell may compute it
        "rows = ms.search('a' + 'b')",  # an expression
        "rows = ms.search(*args)",
        "rows = ms.search(**options)",
        "for q in 'ab':\n    ms.search(q)",
        "if ready:\n    ms.search('a')",  # a block opens first: what runs first is not in the text
        "import other as ms\nms.search('a')",
        "ms = other\nms.search('a')",  # ms rebound
        "del ms\nms.search('a')",
        "f = lambda: ms.search('a')",  # never runs here
        "rows = [ms.search(q) for q in 'ab']",
        "ms.close()",  # never run ahead
        "ms.search()",  # wrong arguments: the cell gets that error itself
        "ms.search('a', nonsense=1)",
        "ms.sql_query('SELECT 1')",  # SQL may read the clock or random(): never ahead
        "ms.expand(3)",  # reads payloads back: time a guess could not give up
        "ms.session('s1')",
        "ms.recall_tool('call_1')",
        "print(ms.sql_query('SELECT 1'))\nms.search('a')",  # ... and it would come first
        "ms.has_fts5",  # a property: a call too, but with nothing to read
        "print(ms.has_fts5)\nms.search('a')",  # ... and it would come first
        "if ms.has_fts5 and ms.search('a'): pass",
        "ms.search('a'",  # not Python
        "ms.search('\0')\0",
        "search('a')",  # no ms
        "ms.search('" + "a" * MAX_SOURCE + "')",  # too long to read
        "x = 1\n" * 64 + "ms.search('a')",  # past the opening statements read
        'x = "\u2028"\nms = None\nms.search("a")',  # a line end for str.splitlines, not Python
    ],
)
def test_a_call_the_text_does_not_pin_down_is_not_read(cell: str) -> None:
    assert first_ms_call(cell) is None


def test_call_keys_tell_apart_what_equality_would_not() -> None:
    def key(k: object) -> str:
        return call_key({"method": "search", "kwargs": {"query": "a", "k": k}})

    assert len({key(1), key(1.0), key(True)}) == 3
    assert key(1) == call_key({"call": 9, "kwargs": {"k": 1, "query": "a"}, "method": "search"})


# -- in a kernel ----------------------------------------------------------------------------


def test_a_literal_first_call_is_answered_ahead_with_the_rows_the_call_would_get(
    tmp_path: Path,
) -> None:
    with channel_in_use(tmp_path) as (session, reader):
        cell = 'rows = ms.search("adoption agencies", k=3)\nprint(list(rows))'
        result, cost = _counted(session.kernel, reader, cell)
        assert result.stdout == _rows(session.log, lambda ms: ms.search("adoption agencies", k=3))
        assert cost == AheadCounts(run=1, used=1, cut=0)


def test_a_commit_before_the_call_keeps_the_answer_ahead_from_being_used(tmp_path: Path) -> None:
    # The tool appends an event once the answer ahead is ready: that answer has not seen it.
    watched = _Watched()
    logs: list[EventLog] = []

    def okapi() -> str:
        """Log that an okapi walked by, once the reader has answered the cell's call ahead."""
        watched.wait(lambda since: since.run > 0)
        logs[0].append(NewEvent(session_id="k1", kind=Kind.CONVERSATION, role="user",
                                content="An okapi walked by the lake."))  # fmt: skip
        return "logged"

    with channel_in_use(tmp_path, tools=[okapi]) as (session, reader):
        logs.append(session.log)
        watched.reader, watched.before = reader, reader.ahead_counts
        cell = 'okapi()\nrows = ms.search("okapi", k=5)\nprint([r["content"] for r in rows])'
        result, cost = _counted(session.kernel, reader, cell)
        assert result.ok, result.error
        assert "An okapi walked by the lake." in result.stdout
        assert cost == AheadCounts(run=1, used=0, cut=0)


@pytest.mark.parametrize(
    "opening",
    [
        # the text's first call is the adoption search; the one that runs is the lake search
        'rows = ms.search("adoption") if False else ms.search("lake", k=2)',
        # the comprehension's call is not read (it may never run), but it runs first here
        'seen = [ms.expand(1) for _ in "x"]\nrows = ms.search("lake", k=2)',
    ],
    ids=["a different call", "not the cell's first request"],
)
def test_a_call_other_than_the_one_read_first_runs_as_usual(tmp_path: Path, opening: str) -> None:
    with channel_in_use(tmp_path) as (session, reader):
        result, cost = _counted(session.kernel, reader, f"{opening}\nprint(list(rows))")
        assert result.stdout == _rows(session.log, lambda ms: ms.search("lake", k=2))
        assert cost == AheadCounts(run=1, used=0, cut=0)


def test_an_answer_ahead_goes_on_as_the_call_once_its_request_has_come(tmp_path: Path) -> None:
    # The search outlasts ahead_seconds; its request comes well within them (the worker sends
    # it as the cell starts), so at the checkpoint the answer goes on as the call.
    limits = ReaderLimits(ahead_seconds=0.01)
    with channel_in_use(tmp_path, reader_limits=limits) as (session, reader):
        _grow(session.log)
        result, cost = _counted(session.kernel, reader, f"rows = {_SLOW}\nprint(list(rows))")
        assert result.stdout == _rows(session.log, lambda ms: ms.search("alpha", k=3))
        assert cost == AheadCounts(run=1, used=1, cut=0)


def test_an_answer_ahead_whose_request_has_not_come_is_given_up(tmp_path: Path) -> None:
    watched = _Watched()

    def hold() -> str:
        """Return once the reader has given up the cell's call answered ahead."""
        watched.wait(lambda since: since.cut > 0)
        return "given up"

    limits = ReaderLimits(ahead_seconds=0.01)
    with channel_in_use(tmp_path, tools=[hold], reader_limits=limits) as (session, reader):
        _grow(session.log)
        watched.reader, watched.before = reader, reader.ahead_counts
        cell = f"hold()\nrows = {_SLOW}\nprint(list(rows))"
        result, cost = _counted(session.kernel, reader, cell)
        assert result.stdout == _rows(session.log, lambda ms: ms.search("alpha", k=3))
        assert cost == AheadCounts(run=1, used=0, cut=1)


def test_ahead_seconds_zero_turns_answering_ahead_off(tmp_path: Path) -> None:
    limits = ReaderLimits(ahead_seconds=0)
    with channel_in_use(tmp_path, reader_limits=limits) as (session, reader):
        result = session.kernel.run_cell('print(list(ms.search("adoption", k=2)))')
        assert result.stdout == _rows(session.log, lambda ms: ms.search("adoption", k=2))
        assert reader.ahead_counts == AheadCounts(0, 0, 0)


def test_a_guess_that_goes_unused_leaves_no_trace_in_later_searches(tmp_path: Path) -> None:
    # The OR pass prunes a term that matches over half the rows, by counts it caches until
    # the store grows 5%. A guess whose cell fails first fills that cache; the rows added
    # next (3.75% more) tip "alpha" over half; a search that came after an unused guess must
    # not prune by its stale count, but by the one it takes itself, as with no guess at all.
    def rows(words: str, n: int) -> list[NewEvent]:
        return [NewEvent(session_id="k1", kind=Kind.CONVERSATION, role="user",
                         content=f"{words} {i}") for i in range(n)]  # fmt: skip

    with channel_in_use(tmp_path) as (session, reader):
        log = session.log
        log.append_many([*rows("alpha filler text", 200), *rows("beta lonely word", 10),
                         *rows("other words gamma", 186)])  # fmt: skip
        failed = session.kernel.run_cell("1/0\nms.search('alpha beta', k=30)")
        assert failed.error is not None  # at once: the guess may still be running
        assert _wait_until(lambda: reader.ahead_counts.run == 1)
        log.append_many(rows("alpha added", 15))
        result = session.kernel.run_cell(
            "hits = ms.search('alpha beta', k=30)\nprint(sorted(h['seq'] for h in hits))"
        )
        with open_surface(log.path, session_id="k1") as ms:  # no search ran before this one
            expected = sorted(h["seq"] for h in ms.search("alpha beta", k=30))
        assert result.stdout == f"{expected}\n", result.error
        assert len(expected) == 10  # beta's rows only: alpha is pruned


def test_a_guess_too_big_to_send_is_not_kept(tmp_path: Path) -> None:
    # Its reply would be refused as over the limit: holding it would only cost the reader
    # memory, so the call runs itself and gets that refusal.
    limits = ReaderLimits(reply_bytes=600)
    with channel_in_use(tmp_path, reader_limits=limits) as (session, reader):
        cell = 'rows = ms.search("adoption lake deploy", k=50)'
        result, cost = _counted(session.kernel, reader, cell)
        assert result.error is not None and "over the 600-byte limit" in result.error
        assert cost == AheadCounts(run=1, used=0, cut=0)


@pytest.mark.parametrize(
    "forged",
    ["{'op': 'ms_ahead', 'call': 7, **request}", "{'op': 'ms', 'call': 'seven', **request}"],
    ids=["a guess", "a call id that is not an int"],
)
def test_a_frame_the_reader_refuses_is_refused_even_when_it_matches_a_guess(
    tmp_path: Path, forged: str
) -> None:
    # The cell writes, on its channel, the very call the host read off its text, in a frame
    # the reader refuses (only the host's pipe takes a guess; a call id must be an int): it
    # is refused, the guess goes unused, and the cell's own call runs as usual.
    with channel_in_use(tmp_path) as (session, reader):
        prelude = WORKER + (
            "from scrollctx.kernel._ahead import first_ms_call\n"
            "request = first_ms_call('ms.search(\"adoption\")')\n"
        )
        assert session.kernel.run_cell(prelude).ok
        cell = (
            f"os.write(w.channel.fd, frame({forged}))\n"
            "reply = w.channel.read(time.monotonic() + 10)\n"
            'rows = ms.search("adoption")\n'
            "print(reply['ok'], 'refused a request' in json.dumps(reply['error']), list(rows))"
        )
        result, cost = _counted(session.kernel, reader, cell)
        expected = _rows(session.log, lambda ms: ms.search("adoption"))
        assert result.stdout == f"False True {expected}", result.error
        assert cost == AheadCounts(run=1, used=0, cut=0)


def test_a_call_too_large_to_encode_fails_in_the_cell_not_the_host(tmp_path: Path) -> None:
    # A literal int past JSON's digit limit (hex has none in Python): the host drops the
    # guess it cannot encode, and the worker's own call fails in the cell, as without it.
    with channel_in_use(tmp_path) as (session, reader):
        result = session.kernel.run_cell("rows = ms.expand(0x" + "f" * 4000 + ")")
        assert result.error is not None and "Exceeds the limit" in result.error
        assert reader.ahead_counts == AheadCounts(0, 0, 0)
        assert session.kernel.run_cell('print(len(ms.search("adoption")) > 0)').stdout == "True\n"


def test_on_a_shared_store_the_guess_reads_the_replica_after_its_refresh(
    postgres_url: str, tmp_path: Path
) -> None:
    # Each cell first brings this host's replica up to date with the other hosts' rows; a
    # guess run before that would read the replica without them and go unused (the refresh
    # commits them): run after it, the guess is the call's answer, other hosts' rows and all.
    environ = {"SCROLL_LOCAL_DIR": str(tmp_path / "here")}
    here = open_store(resolve_config(postgres_url, environ=environ))
    other_host = open_store(resolve_config(postgres_url, environ={
        "SCROLL_LOCAL_DIR": str(tmp_path / "other")}))  # fmt: skip
    try:
        here.append(NewEvent(session_id="k1", kind=Kind.CONVERSATION, content="warm up"))
        with Kernel(event_log=here, session_id="k1", scratch=tmp_path / "scratch") as kernel:
            assert kernel.start_reader() and kernel.run_cell("ms.has_fts5").ok
            reader = kernel.reader
            assert reader is not None
            other_host.append(NewEvent(session_id="k1", kind=Kind.CONVERSATION,
                                       content="the okapi crossed the river"))  # fmt: skip
            cell = 'print([r["content"] for r in ms.search("okapi", k=3)])'
            result, cost = _counted(kernel, reader, cell)
            assert result.stdout == "['the okapi crossed the river']\n", result.error
            assert cost == AheadCounts(run=1, used=1, cut=0)
    finally:
        other_host.close()
        here.close()


def test_a_guess_the_pipe_cannot_take_whole_is_dropped_never_torn(tmp_path: Path) -> None:
    # With the reader stopped, its pipe is filled with guesses of about 4 KB (one page each),
    # drained, then filled again to one page short: a guess larger than a pipe writes whole
    # (PIPE_BUF) would now go in only in part, so it is not written at all. The reader,
    # resumed, reads every frame whole: the host's next call through its pipe is answered, by
    # the same reader.
    def guess(pad: int) -> dict[str, object]:
        return {"method": "sessions", "kwargs": {"all_agents": "x" * pad}}

    with channel_in_use(tmp_path) as (session, reader):
        pid, restarts, before = reader.pid, reader.restarts, reader.ahead_counts
        assert pid is not None
        with _stopped(pid):
            pages = 0
            while reader.ask_ahead(10**6 + pages, guess(3_900)):
                pages += 1
        assert pages > 1 and _wait_until(lambda: _since(reader, before).run == pages)
        with _stopped(pid):
            assert all(reader.ask_ahead(2 * 10**6 + n, guess(3_900)) for n in range(pages - 1))
            assert not reader.ask_ahead(3 * 10**6, guess(4_200))  # over PIPE_BUF
        reply = reader.request({"method": "has_fts5", "kwargs": {}})
        assert reply["ok"] is True and reply["value"] is True
        assert (reader.pid, reader.restarts) == (pid, restarts)


@contextmanager
def _stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
